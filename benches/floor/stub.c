// A do-nothing AgentX subagent for the floor of the daemon's per-PDU cost through the real
// snmpd: Open, Register 1.3.6.1.4.1.32473.1, then answer each GetNext under memTypeTable
// with the next (column, row) of an N-row, 23-column table, a Counter64 each. The same
// varbinds as the daemon's walk, with no other work: epoll_wait + recv + send per PDU.
// Usage: stub SOCKET [ROWS [in]]
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static uint8_t in[70000], out[70000];
static int fd;
static uint32_t sid;

static void put32(uint8_t *p, uint32_t v) { v = htonl(v); memcpy(p, &v, 4); }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return ntohl(v); }

static size_t hdr(uint8_t *p, uint8_t type, uint32_t tid, uint32_t pid) {
    p[0] = 1; p[1] = type; p[2] = 0x10; p[3] = 0;
    put32(p + 4, sid); put32(p + 8, tid); put32(p + 12, pid); put32(p + 16, 0);
    return 20;
}
static size_t oid(uint8_t *p, const uint32_t *s, int n) { // plain form, no prefix
    p[0] = n; p[1] = 0; p[2] = 0; p[3] = 0;
    for (int i = 0; i < n; i++) put32(p + 4 + 4 * i, s[i]);
    return 4 + 4 * n;
}
static void readn(uint8_t *p, size_t n) {
    size_t got = 0;
    while (got < n) { ssize_t r = recv(fd, p + got, n - got, 0); if (r <= 0) exit(0); got += r; }
}
static size_t frame(void) { // one recv for a whole PDU, as the daemon does
    ssize_t r = recv(fd, in, sizeof in, 0); if (r <= 0) exit(0);
    if (r < 20) { readn(in + r, 20 - r); r = 20; }
    size_t len = 20 + get32(in + 16);
    if ((size_t)r < len) readn(in + r, len - r);
    return len;
}
static void sendall(size_t n) { send(fd, out, n, MSG_NOSIGNAL); }

int main(int argc, char **argv) {
    const char *path = argv[1];
    uint32_t rows = argc > 2 ? atoi(argv[2]) : 300;
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strncpy(a.sun_path, path, sizeof a.sun_path - 1);
    if (connect(fd, (void *)&a, sizeof a)) { perror("connect"); return 1; }
    static const uint32_t root[] = {1, 3, 6, 1, 4, 1, 32473, 1};
    // Open
    size_t n = hdr(out, 1, 0, 1);
    out[n] = 5; out[n + 1] = out[n + 2] = out[n + 3] = 0; n += 4;
    n += oid(out + n, root, 8);
    put32(out + n, 4); memcpy(out + n + 4, "stub", 4); n += 8;
    put32(out + 16, n - 20); sendall(n);
    frame(); sid = get32(in + 4);
    // Register
    n = hdr(out, 3, 0, 2);
    out[n] = 0; out[n + 1] = 127; out[n + 2] = 0; out[n + 3] = 0; n += 4;
    n += oid(out + n, root, 8);
    put32(out + 16, n - 20); sendall(n);
    frame();
    int ep = epoll_create1(0);
    /* "in" as the third argument registers for EPOLLIN only; the default also registers
     * EPOLLOUT, as tokio's stream types do. */
    int in_only = argc > 3 && strcmp(argv[3], "in") == 0;
    struct epoll_event ev = {.events = EPOLLIN | (in_only ? 0 : EPOLLOUT) | EPOLLET};
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    for (;;) {
        struct epoll_event e;
        epoll_wait(ep, &e, 1, 15000);
        frame();
        if (in[1] != 6) { // only GetNext is answered; anything else gets an empty Response
            if (in[1] == 18) continue;
            n = hdr(out, 18, get32(in + 8), get32(in + 12));
            memset(out + n, 0, 8); n += 8; put32(out + 16, n - 20); sendall(n);
            continue;
        }
        // The first SearchRange's start OID.
        const uint8_t *p = in + 20;
        int ns = p[0], prefix = p[1];
        uint32_t s[140]; int k = 0;
        if (prefix) { s[k++] = 1; s[k++] = 3; s[k++] = 6; s[k++] = 1; s[k++] = prefix; }
        for (int i = 0; i < ns && k < 140; i++) s[k++] = get32(p + 4 + 4 * i);
        // memTypeTable = root.1.2 (10 subids), entry .1, column, row
        uint32_t t[13]; memcpy(t, root, sizeof root); t[8] = 1; t[9] = 2; t[10] = 1;
        uint32_t col = 2, row = 1; int end = 0;
        if (k >= 12 && s[10] == 1) {
            col = s[11] < 2 ? 2 : s[11];
            row = k >= 13 ? s[12] + 1 : 1;
            if (row > rows) { row = 1; col++; }
            if (col > 24) end = 1;
        }
        n = hdr(out, 18, get32(in + 8), get32(in + 12));
        memset(out + n, 0, 8); n += 8;
        if (end) {
            out[n] = 0; out[n + 1] = 130; out[n + 2] = out[n + 3] = 0; n += 4;
            n += oid(out + n, s, k);
        } else {
            t[11] = col; t[12] = row;
            out[n] = 0; out[n + 1] = 70; out[n + 2] = out[n + 3] = 0; n += 4;
            n += oid(out + n, t, 13);
            put32(out + n, 2); put32(out + n + 4, row); n += 8;
        }
        put32(out + 16, n - 20); sendall(n);
    }
}
