/* udp_blast: a bounded UDP sender for small-frame throughput tests, faster than iperf3's and
 * latnet-switch send's one sendto() per datagram: it sends batches of 64 datagrams per
 * sendmmsg() on a connected UDP socket.
 *
 *   udp_blast SRC_IP SRC_PORT DST_IP DST_PORT --payload BYTES --count N --seconds S [--flow I]
 *
 * Stops after N datagrams, after S seconds, or on SIGINT/SIGTERM, whichever comes first, then
 * prints {"sent": .., "send_errors": .., "seconds": ..} on stdout. The payload is latnet's
 * traffic payload (crates/latnet-switch/src/traffic.rs), so `latnet-switch recv` checks every
 * datagram for corruption, loss and reordering: magic 0x4c4e, flow index, sequence number and
 * CLOCK_MONOTONIC send instant (big-endian), then byte k = (seq + k) ^ 0x5a.
 * Exit status 0, 2 on a usage error, 1 on a system error.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH 64
#define HEADER 16
#define MAX_PAYLOAD 1472

static volatile sig_atomic_t stop;

static void on_signal(int sig) {
    (void)sig;
    stop = 1;
}

static uint64_t mono_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void put_be(unsigned char *p, uint64_t v, int n) {
    for (int i = n - 1; i >= 0; i--) {
        p[i] = (unsigned char)(v & 0xff);
        v >>= 8;
    }
}

static void fill(unsigned char *p, size_t len, uint16_t flow, uint32_t seq, uint64_t ns) {
    put_be(p, 0x4c4e, 2);
    put_be(p + 2, flow, 2);
    put_be(p + 4, seq, 4);
    put_be(p + 8, ns, 8);
    for (size_t k = HEADER; k < len; k++)
        p[k] = (unsigned char)(((unsigned char)seq + (unsigned char)(k - HEADER)) ^ 0x5a);
}

static int addr(const char *ip, const char *port, struct sockaddr_in *a) {
    char *end = NULL;
    long p = strtol(port, &end, 10);
    memset(a, 0, sizeof *a);
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)p);
    return (*end || p < 0 || p > 65535 || inet_pton(AF_INET, ip, &a->sin_addr) != 1) ? -1 : 0;
}

static int usage(void) {
    fprintf(stderr, "usage: udp_blast SRC_IP SRC_PORT DST_IP DST_PORT --payload BYTES (%d..%d) "
                    "--count N --seconds S [--flow I]\n",
            HEADER, MAX_PAYLOAD);
    return 2;
}

int main(int argc, char **argv) {
    if (argc < 5) return usage();
    struct sockaddr_in src, dst;
    if (addr(argv[1], argv[2], &src) || addr(argv[3], argv[4], &dst)) return usage();
    long payload = -1, flow = 0;
    unsigned long long count = 0;
    double seconds = 0;
    for (int i = 5; i < argc; i++) {
        char *end = NULL;
        if (i + 1 >= argc) return usage();
        if (strcmp(argv[i], "--payload") == 0) {
            payload = strtol(argv[++i], &end, 10);
            if (*end || payload < HEADER || payload > MAX_PAYLOAD) return usage();
        } else if (strcmp(argv[i], "--count") == 0) {
            count = strtoull(argv[++i], &end, 10);
            if (*end || count == 0) return usage();
        } else if (strcmp(argv[i], "--seconds") == 0) {
            seconds = strtod(argv[++i], &end);
            if (*end || !(seconds > 0)) return usage();
        } else if (strcmp(argv[i], "--flow") == 0) {
            flow = strtol(argv[++i], &end, 10);
            if (*end || flow < 0 || flow > 65535) return usage();
        } else {
            return usage();
        }
    }
    if (payload < 0 || count == 0 || seconds <= 0) return usage();

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    int buf = 4 << 20;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf) < 0 ||
        bind(fd, (struct sockaddr *)&src, sizeof src) < 0 ||
        connect(fd, (struct sockaddr *)&dst, sizeof dst) < 0) {
        perror("udp_blast: socket");
        return 1;
    }
    static unsigned char bufs[BATCH][MAX_PAYLOAD];
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    memset(msgs, 0, sizeof msgs);
    for (int i = 0; i < BATCH; i++) {
        iov[i].iov_base = bufs[i];
        iov[i].iov_len = (size_t)payload;
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    uint64_t start = mono_ns();
    uint64_t deadline = start + (uint64_t)(seconds * 1e9);
    unsigned long long sent = 0, errors = 0;
    while (!stop && sent < count) {
        uint64_t now = mono_ns();
        if (now >= deadline) break;
        unsigned n = (count - sent) < BATCH ? (unsigned)(count - sent) : BATCH;
        for (unsigned i = 0; i < n; i++)
            fill(bufs[i], (size_t)payload, (uint16_t)flow, (uint32_t)(sent + i), now);
        unsigned done = 0;
        while (done < n && !stop) {
            int s = sendmmsg(fd, msgs + done, n - done, 0);
            if (s < 0) {
                if (errno == EINTR) continue;
                /* ENOBUFS and friends: this datagram is lost; count it and go on. */
                errors++;
                done++;
                continue;
            }
            done += (unsigned)s;
        }
        sent += done;
    }
    printf("{\"sent\": %llu, \"send_errors\": %llu, \"seconds\": %.6f}\n", sent, errors,
           (double)(mono_ns() - start) / 1e9);
    close(fd);
    return 0;
}
