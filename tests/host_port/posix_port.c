/* A POSIX port of the splitter runtime (library mode): one process per board, one connected
 * socket per link (tests/test_runtime_posix.py). It implements splitter_port.h like a product
 * would with its HAL: a reader thread per link plays the UART receive interrupt and hands the
 * bytes to splitter_port_received; writes go straight to the socket; the millisecond clock is
 * CLOCK_MONOTONIC. The application half is a superloop over splitter.h only: the head submits
 * `count` inputs from a file of back-to-back samples, the board that ends the chain prints each
 * result as "result <inference> <hex>" and exits after `count`.
 *
 * usage: board FD0 FD1 ... (one per link, -1 for a link facing the host) [SAMPLES COUNT]
 * (COUNT 0: print the status after splitter_init and exit)
 * A link whose peer closes ends the process with status 0. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "splitter.h"
#include "splitter_port.h"

#ifdef CLOCK_STATUS /* what startup.c reports when the HSE did not start (1) */
volatile uint32_t splitter_clock_status = CLOCK_STATUS;
#endif

static int fds[N_LINKS];
static uint8_t *samples; /* still reachable at exit */
static uint32_t results, count;

void splitter_port_write(int link, const uint8_t *data, uint32_t n) {
    while (n > 0) {
        ssize_t w = write(fds[link], data, n);
        if (w <= 0) exit(0);
        data += w;
        n -= (uint32_t)w;
    }
}

uint32_t splitter_port_millis(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint32_t)((uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u);
}

/* While the runtime waits for a byte or an acknowledgement: let the other boards run. */
void splitter_port_wait(void) {
    struct timespec nap = {0, 50000};
    nanosleep(&nap, 0);
}

static void *reader(void *arg) {
    int l = (int)(intptr_t)arg;
    uint8_t buf[256];
    for (;;) {
        ssize_t n = read(fds[l], buf, sizeof buf);
        if (n <= 0) exit(0); /* the peer closed the link: the chain is over */
        splitter_port_received(l, buf, (uint32_t)n);
    }
    return 0;
}

static void on_result(const splitter_result_t *r, void *user) {
    (void)user;
    printf("result %u ", (unsigned)r->inference);
    for (uint32_t t = 0; t < r->n_outputs; t++) {
        const uint8_t *p = (const uint8_t *)r->data[t];
        for (uint32_t k = 0; k < r->bytes[t]; k++) printf("%02x", p[k]);
        printf(t + 1 < r->n_outputs ? "," : "\n");
    }
    fflush(stdout);
    if (++results >= count) exit(0);
}

static uint8_t *read_samples(const char *path, long *size) {
    FILE *f = fopen(path, "rb");
    if (!f) exit(3);
    fseek(f, 0, SEEK_END);
    *size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc((size_t)*size + 1u);
    if (!p || fread(p, 1, (size_t)*size, f) != (size_t)*size) exit(3);
    fclose(f);
    return p;
}

int main(int argc, char **argv) {
    if (argc < 1 + N_LINKS) return 2;
    for (int l = 0; l < N_LINKS; l++) fds[l] = atoi(argv[1 + l]);
    long size = 0;
    samples = argc > 1 + N_LINKS ? read_samples(argv[1 + N_LINKS], &size) : 0;
    count = argc > 2 + N_LINKS ? (uint32_t)atoi(argv[2 + N_LINKS]) : 0;
    splitter_init();
    if (count == 0) { /* status only */
        const splitter_status_t *s = splitter_status();
        printf("status %d clock %u: %s\n", (int)s->code, (unsigned)s->clock, s->text);
        return 0;
    }
    splitter_on_result(on_result, 0);
    for (int l = 0; l < N_LINKS; l++) {
        pthread_t th;
        if (fds[l] >= 0) pthread_create(&th, 0, reader, (void *)(intptr_t)l);
    }
    uint32_t n = splitter_input_bytes(), submitted = 0;
    uint32_t n_samples = n ? (uint32_t)(size / (long)n) : 0;
    for (;;) {
        if (n && n_samples && submitted < count && splitter_ready()) {
            if (splitter_submit(samples + (submitted % n_samples) * n, n) == SPLITTER_OK) {
                submitted++;
            }
        }
        if (!splitter_poll()) {
            struct timespec nap = {0, 100000};
            nanosleep(&nap, 0);
        }
        const splitter_status_t *s = splitter_status();
        if (s->code == SPLITTER_ERR_PLAN) {
            fprintf(stderr, "status %d device %u link %u: %s\n", (int)s->code, s->device,
                    s->link, s->text);
            return 4;
        }
    }
}
