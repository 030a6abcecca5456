//! Framing: a byte stream in, whole PDUs out, with no I/O of its own.
//!
//! A stream transport (a Unix or TCP socket) delivers bytes in whatever pieces the kernel
//! hands over. [`Splitter`] collects them and cuts whole frames by their headers' payload
//! lengths, so that the transport only has to read and [`push`](Splitter::push). What it
//! holds is bounded: a frame is at most [`HEADER_LEN`] + [`MAX_PAYLOAD`] octets, and a header
//! that announces more is refused before its payload is waited for.

use crate::pdu::{DecodeError, Header, Pdu, SearchRange, HEADER_LEN, MAX_PAYLOAD};

/// One frame cut from the stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    Pdu(Pdu),
    /// A frame whose header was fine but whose payload was not: a subagent answers it with
    /// parseError and goes on, as RFC 2741 §7.2.2 asks.
    Bad(Header, DecodeError),
}

/// Collects a stream's bytes and cuts them into frames.
#[derive(Debug, Default)]
pub struct Splitter {
    buf: Vec<u8>,
    /// The SearchRanges of a request handed back by [`recycle`](Self::recycle): the next
    /// frame is decoded into their memory.
    spare: Vec<SearchRange>,
}

impl Splitter {
    pub fn new() -> Splitter {
        Splitter::default()
    }

    /// Appends bytes read from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Hands back a PDU this splitter made, once done with it, so that the next frame is
    /// decoded into its memory instead of new allocations (see [`Pdu::decode_reusing`]).
    pub fn recycle(&mut self, pdu: Pdu) {
        self.spare = pdu.into_ranges();
    }

    /// The bytes held that are not yet a whole frame (or not yet taken).
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// The next whole frame, `Ok(None)` when the bytes so far do not hold one, or the error
    /// that loses the framing (bad version, a payload too long or not a multiple of 4): after
    /// it nothing in the stream can be trusted, and the connection must be dropped.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, DecodeError> {
        if self.buf.len() < HEADER_LEN {
            return Ok(None);
        }
        let h = Header::decode(&self.buf)?;
        let len = h.frame_len();
        debug_assert!(len <= HEADER_LEN + MAX_PAYLOAD, "Header::decode bounds it");
        if self.buf.len() < len {
            return Ok(None);
        }
        let frame = match Pdu::decode_into_ranges(&self.buf[..len], std::mem::take(&mut self.spare))
        {
            Ok(p) => Frame::Pdu(p),
            Err(e) if !e.fatal() => Frame::Bad(h, e),
            Err(e) => return Err(e),
        };
        self.buf.drain(..len);
        Ok(Some(frame))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oid::Oid;
    use crate::pdu::{DecodeErrorKind, Payload};

    #[test]
    fn a_recycled_pdu_lends_its_memory_to_the_next_frame() {
        let range = |start: &[u32]| SearchRange {
            start: Oid(start.to_vec()),
            include: false,
            end: Oid(vec![1, 3, 6, 1, 4, 1, 32474]),
        };
        let mut bytes = Vec::new();
        let two = Payload::GetNext {
            ranges: vec![
                range(&[1, 3, 6, 1, 4, 1, 32473, 1, 1]),
                range(&[1, 3, 6, 1, 9]),
            ],
        };
        let one = Payload::GetNext {
            ranges: vec![range(&[1, 3, 6, 1, 2, 1])],
        };
        Pdu::new(1, 2, 3, two.clone()).encode(&mut bytes);
        Pdu::new(1, 2, 4, one.clone()).encode(&mut bytes);
        let mut s = Splitter::new();
        s.push(&bytes);
        let Some(Frame::Pdu(first)) = s.next_frame().unwrap() else {
            panic!("a frame")
        };
        assert_eq!(first.payload, two);
        let Payload::GetNext { ranges } = &first.payload else {
            unreachable!()
        };
        let memory = ranges[0].start.0.as_ptr();
        s.recycle(first);
        let Some(Frame::Pdu(second)) = s.next_frame().unwrap() else {
            panic!("a frame")
        };
        assert_eq!(second.payload, one, "the second range of the first is gone");
        let Payload::GetNext { ranges } = &second.payload else {
            unreachable!()
        };
        assert_eq!(
            ranges[0].start.0.as_ptr(),
            memory,
            "decoded into the spare's OID"
        );
    }

    fn two_frames() -> Vec<u8> {
        let mut bytes = Vec::new();
        Pdu::new(1, 2, 3, Payload::Ping).encode(&mut bytes);
        Pdu::new(1, 2, 4, Payload::CommitSet).encode(&mut bytes);
        bytes
    }

    #[test]
    fn frames_split_across_pushes_come_out_whole() {
        let bytes = two_frames();
        // Every split point, one byte at a time included.
        for cut in 0..=bytes.len() {
            let mut s = Splitter::new();
            let mut got = Vec::new();
            for piece in [&bytes[..cut], &bytes[cut..]] {
                for b in piece.chunks(if cut % 2 == 0 { 1 } else { 64 }) {
                    s.push(b);
                    while let Some(f) = s.next_frame().unwrap() {
                        match f {
                            Frame::Pdu(p) => got.push(p.ids.packet_id),
                            Frame::Bad(_, e) => panic!("{e}"),
                        }
                    }
                }
            }
            assert_eq!(got, [3, 4], "cut at {cut}");
            assert_eq!(s.pending(), 0);
        }
    }

    #[test]
    fn half_a_header_is_not_a_frame() {
        let mut s = Splitter::new();
        s.push(&two_frames()[..7]);
        assert_eq!(s.next_frame(), Ok(None));
        assert_eq!(s.pending(), 7);
    }

    #[test]
    fn a_bad_payload_is_a_bad_frame_and_the_stream_goes_on() {
        let mut bytes = Vec::new();
        // A Ping whose payload length says 4 and whose payload is 4 octets of nothing a Ping
        // carries: the header frames it, the payload does not decode.
        Pdu::new(1, 2, 3, Payload::Ping).encode(&mut bytes);
        bytes[16..20].copy_from_slice(&4u32.to_be_bytes());
        bytes.extend_from_slice(&[0, 0, 0, 0]);
        Pdu::new(1, 2, 9, Payload::Ping).encode(&mut bytes);
        let mut s = Splitter::new();
        s.push(&bytes);
        assert!(matches!(s.next_frame(), Ok(Some(Frame::Bad(h, _))) if h.ids.packet_id == 3));
        assert!(matches!(s.next_frame(), Ok(Some(Frame::Pdu(p))) if p.ids.packet_id == 9));
    }

    #[test]
    fn a_header_that_loses_framing_is_an_error() {
        let mut bytes = two_frames();
        bytes[0] = 2; // version 2
        let mut s = Splitter::new();
        s.push(&bytes);
        let e = s.next_frame().unwrap_err();
        assert_eq!(e.kind, DecodeErrorKind::BadVersion);
        assert!(e.fatal());
    }
}
