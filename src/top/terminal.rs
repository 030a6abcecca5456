//! The real terminal of the full-screen view: raw mode and the alternate screen on the way
//! in, and the terminal as it was on every way out: a return, a panic, and SIGTERM, SIGHUP,
//! SIGINT or SIGQUIT (noted by a flag the loop looks at between keys; the flag's handler only
//! sets it, so nothing is written to the terminal from a signal handler).
//!
//! ratatui writes only the cells that changed since the last frame. Its one full clear is on
//! a change of size, when every cell has to be written again anyway.

use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::{cursor, execute, terminal};
use ratatui::Terminal;
use std::io::{self, Stdout};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Once};

/// Whether the terminal is in the view's modes, so that a restore runs once whoever asks.
static ACTIVE: AtomicBool = AtomicBool::new(false);
static PANIC_HOOK: Once = Once::new();

/// The terminal while the view runs; dropping it restores the terminal.
pub(super) struct Screen {
    pub(super) terminal: Terminal<CrosstermBackend<Stdout>>,
    /// The signal that asked the view to end, once one has.
    signalled: Arc<SignalFlags>,
}

/// One flag per signal that ends the view.
#[derive(Default)]
struct SignalFlags {
    term: Arc<AtomicBool>,
    hup: Arc<AtomicBool>,
    int: Arc<AtomicBool>,
    quit: Arc<AtomicBool>,
}

impl Screen {
    /// Raw mode, the alternate screen, the cursor hidden; the panic hook and the signal flags
    /// set up first, so that no way out leaves the terminal in raw mode.
    pub(super) fn enter() -> io::Result<Screen> {
        let flags = Arc::new(SignalFlags::default());
        for (signal, flag) in [
            (signal_hook::consts::SIGTERM, &flags.term),
            (signal_hook::consts::SIGHUP, &flags.hup),
            (signal_hook::consts::SIGINT, &flags.int),
            (signal_hook::consts::SIGQUIT, &flags.quit),
        ] {
            signal_hook::flag::register(signal, flag.clone())?;
        }
        PANIC_HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                restore();
                previous(info);
            }));
        });
        ACTIVE.store(true, Ordering::SeqCst);
        let entered = terminal::enable_raw_mode()
            .and_then(|()| execute!(io::stdout(), terminal::EnterAlternateScreen, cursor::Hide));
        if let Err(e) = entered {
            restore();
            return Err(e);
        }
        let terminal = match Terminal::new(CrosstermBackend::new(io::stdout())) {
            Ok(t) => t,
            Err(e) => {
                restore();
                return Err(e);
            }
        };
        Ok(Screen {
            terminal,
            signalled: flags,
        })
    }

    /// The signal asking the view to end, if one came: its number.
    pub(super) fn signalled(&self) -> Option<i32> {
        let f = &self.signalled;
        [
            (&f.term, signal_hook::consts::SIGTERM),
            (&f.hup, signal_hook::consts::SIGHUP),
            (&f.int, signal_hook::consts::SIGINT),
            (&f.quit, signal_hook::consts::SIGQUIT),
        ]
        .into_iter()
        .find(|(flag, _)| flag.load(Ordering::SeqCst))
        .map(|(_, n)| n)
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore();
    }
}

/// Leaves the alternate screen and raw mode and shows the cursor, once.
fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = terminal::disable_raw_mode();
        let _ = execute!(io::stdout(), terminal::LeaveAlternateScreen, cursor::Show);
    }
}
