/* link.h over POSIX file descriptors (one connected socket per link, from argv): the test's
 * transport. A link whose peer closed ends the program with status 0 (the test is over). */
#define _POSIX_C_SOURCE 200809L
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#include "config.h"
#include "link.h"
#include "timer.h"

int link_fd[N_LINKS];

void link_init(void) {}

static int read_one(int l) {
    uint8_t c;
    ssize_t n = read(link_fd[l], &c, 1);
    if (n <= 0) exit(0); /* the peer closed the link */
    return c;
}

int link_read_byte(int l, uint64_t deadline) {
    for (;;) {
        uint64_t now = timer_now();
        if (now >= deadline) {
            struct pollfd p = {link_fd[l], POLLIN, 0};
            return poll(&p, 1, 0) > 0 ? read_one(l) : -1;
        }
        uint64_t wait_ms = (deadline - now + 999u) / 1000u;
        struct pollfd p = {link_fd[l], POLLIN, 0};
        if (poll(&p, 1, (int)(wait_ms > 1000u ? 1000u : wait_ms)) > 0) return read_one(l);
    }
}

int link_wait_any(void) {
    struct pollfd p[N_LINKS];
    for (int l = 0; l < N_LINKS; l++) {
        p[l].fd = link_fd[l];
        p[l].events = POLLIN;
        p[l].revents = 0;
    }
    for (;;) {
        if (poll(p, N_LINKS, -1) <= 0) continue;
        for (int l = 0; l < N_LINKS; l++) {
            if (p[l].revents & (POLLIN | POLLHUP)) return l;
        }
    }
}

void link_write(int l, const uint8_t *data, uint32_t n) {
    while (n > 0) {
        ssize_t w = write(link_fd[l], data, n);
        if (w <= 0) exit(0);
        data += w;
        n -= (uint32_t)w;
    }
}
