// Floor of a subagent's per-PDU cost: a responder that does nothing but the system calls of
// an event loop (epoll_wait + recv + send) or of a blocking loop (recv + send), against a
// requester doing select + send + recv, both pinned to the same CPU.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <sys/resource.h>
#include <time.h>

static double cpu_of(pid_t pid) { // seconds, from /proc/PID/stat
    char p[64]; snprintf(p, sizeof p, "/proc/%d/stat", pid);
    FILE *f = fopen(p, "r"); char buf[1024]; fgets(buf, sizeof buf, f); fclose(f);
    char *s = strrchr(buf, ')') + 2; unsigned long ut, st; int i;
    for (i = 0; i < 11; i++) s = strchr(s, ' ') + 1;
    sscanf(s, "%lu %lu", &ut, &st); return (ut + st) / (double)sysconf(_SC_CLK_TCK);
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 200000, use_epoll = argc > 2 ? atoi(argv[2]) : 1;
    int sv[2]; socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    char req[80] = {0}, res[64] = {0};
    pid_t child = fork();
    if (child == 0) { // responder
        close(sv[0]); int fd = sv[1];
        int ep = epoll_create1(0); struct epoll_event ev = {.events = EPOLLIN | EPOLLET}; epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
        for (;;) {
            if (use_epoll) { struct epoll_event e; epoll_wait(ep, &e, 1, 15000); }
            ssize_t r = recv(fd, req, sizeof req, 0); if (r <= 0) _exit(0);
            send(fd, res, sizeof res, 0);
        }
    }
    close(sv[1]); int fd = sv[0];
    double c0 = cpu_of(getpid()), r0 = cpu_of(child);
    struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < n; i++) {
        send(fd, req, sizeof req, 0);
        fd_set s; FD_ZERO(&s); FD_SET(fd, &s); select(fd + 1, &s, 0, 0, 0);
        recv(fd, res, sizeof res, 0);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double c1 = cpu_of(getpid()), r1 = cpu_of(child);
    double el = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("%s responder: %d round trips in %.3f s: requester %.2f us, responder %.2f us CPU per round trip\n",
           use_epoll ? "epoll" : "blocking", n, el, (c1 - c0) * 1e6 / n, (r1 - r0) * 1e6 / n);
    close(fd); waitpid(child, 0, 0); return 0;
}
