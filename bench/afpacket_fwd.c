/* afpacket_fwd: a minimal two-port AF_PACKET forwarder, the "C forwarder ceiling" that
 * bench/switch_peers.py measures latnet-switch against.
 *
 *   afpacket_fwd IF_A IF_B [--batch N] [--seconds S]
 *
 * Every frame received on IF_A is sent on IF_B and vice versa (no learning, no lookup: the
 * smallest amount of work a software switch can do per frame). One thread, poll() on both
 * sockets, then per readable socket:
 *   --batch 1   one frame per system call: recv() then send(), until the socket is empty;
 *   --batch N   recvmmsg() of up to N frames, then one sendmmsg() of them (default 64).
 *
 * Offloads: the sockets carry plain frames (no PACKET_VNET_HDR), so the hosts must send
 * complete frames with complete checksums: the bench turns tx checksum offload, TSO and GSO off
 * on the host interfaces, the same setting every data path in the bench sees. A frame larger
 * than the receive buffer (a GSO/GRO super-packet would be) is counted as truncated and dropped
 * so that a wrong offload setting shows up in the counters instead of corrupting data.
 *
 * Own transmissions are not received back (PACKET_IGNORE_OUTGOING). Runs until --seconds
 * (default 60) elapse or SIGINT/SIGTERM; then prints its counters as one JSON line on stdout.
 * Exit status 0, 2 on a usage error, 1 on a system error.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

#define MAX_BATCH 256
#define BUF_BYTES 2048 /* a full-size frame (1514) fits; anything larger is a super-packet */

struct port {
    const char *name;
    int fd;
    uint64_t rx, tx, tx_err, trunc;
};

static volatile sig_atomic_t stop;

static void on_signal(int sig) {
    (void)sig;
    stop = 1;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int open_port(struct port *p) {
    unsigned idx = if_nametoindex(p->name);
    if (idx == 0) {
        fprintf(stderr, "afpacket_fwd: no interface %s: %s\n", p->name, strerror(errno));
        return -1;
    }
    p->fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
    if (p->fd < 0) {
        perror("afpacket_fwd: socket(AF_PACKET)");
        return -1;
    }
    int one = 1;
    if (setsockopt(p->fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) < 0) {
        perror("afpacket_fwd: PACKET_IGNORE_OUTGOING");
        return -1;
    }
    int buf = 8 << 20;
    setsockopt(p->fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    setsockopt(p->fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    struct sockaddr_ll sll;
    memset(&sll, 0, sizeof sll);
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = (int)idx;
    if (bind(p->fd, (struct sockaddr *)&sll, sizeof sll) < 0) {
        fprintf(stderr, "afpacket_fwd: bind %s: %s\n", p->name, strerror(errno));
        return -1;
    }
    struct packet_mreq mr;
    memset(&mr, 0, sizeof mr);
    mr.mr_ifindex = (int)idx;
    mr.mr_type = PACKET_MR_PROMISC;
    if (setsockopt(p->fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof mr) < 0) {
        perror("afpacket_fwd: PACKET_MR_PROMISC");
        return -1;
    }
    return 0;
}

/* One frame per system call until `in` is empty. */
static int forward_single(struct port *in, struct port *out, unsigned char *buf) {
    for (;;) {
        ssize_t n = recv(in->fd, buf, BUF_BYTES, MSG_DONTWAIT | MSG_TRUNC);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
            if (errno == EINTR) return 0;
            perror("afpacket_fwd: recv");
            return -1;
        }
        in->rx++;
        if (n > BUF_BYTES) {
            in->trunc++;
            continue;
        }
        if (send(out->fd, buf, (size_t)n, 0) == n)
            out->tx++;
        else
            out->tx_err++;
        if (stop) return 0;
    }
}

/* Batches of up to `batch` frames until `in` is empty (or a batch came back short). */
static int forward_batch(struct port *in, struct port *out, unsigned batch, struct mmsghdr *rx,
                         struct mmsghdr *tx, struct iovec *iov, struct iovec *txiov) {
    for (;;) {
        for (unsigned i = 0; i < batch; i++) {
            rx[i].msg_hdr.msg_iov = &iov[i];
            rx[i].msg_hdr.msg_iovlen = 1;
            rx[i].msg_hdr.msg_name = NULL;
            rx[i].msg_hdr.msg_namelen = 0;
            rx[i].msg_hdr.msg_control = NULL;
            rx[i].msg_hdr.msg_controllen = 0;
            rx[i].msg_hdr.msg_flags = 0;
        }
        int n = recvmmsg(in->fd, rx, batch, MSG_DONTWAIT, NULL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
            perror("afpacket_fwd: recvmmsg");
            return -1;
        }
        unsigned m = 0;
        for (int i = 0; i < n; i++) {
            in->rx++;
            if (rx[i].msg_hdr.msg_flags & MSG_TRUNC) {
                in->trunc++;
                continue;
            }
            txiov[m].iov_base = iov[i].iov_base;
            txiov[m].iov_len = rx[i].msg_len;
            memset(&tx[m].msg_hdr, 0, sizeof tx[m].msg_hdr);
            tx[m].msg_hdr.msg_iov = &txiov[m];
            tx[m].msg_hdr.msg_iovlen = 1;
            m++;
        }
        unsigned done = 0;
        while (done < m) {
            int s = sendmmsg(out->fd, tx + done, m - done, 0);
            if (s <= 0) {
                if (s < 0 && errno == EINTR) continue;
                /* ENOBUFS and friends: this frame is lost, go on with the rest. */
                out->tx_err++;
                done++;
                continue;
            }
            out->tx += (uint64_t)s;
            done += (unsigned)s;
        }
        if ((unsigned)n < batch || stop) return 0;
    }
}

static int usage(void) {
    fprintf(stderr, "usage: afpacket_fwd IF_A IF_B [--batch N (1..%d, default 64)] "
                    "[--seconds S (default 60)]\n",
            MAX_BATCH);
    return 2;
}

int main(int argc, char **argv) {
    if (argc < 3) return usage();
    struct port ports[2] = {{.name = argv[1], .fd = -1}, {.name = argv[2], .fd = -1}};
    long batch = 64;
    double seconds = 60;
    for (int i = 3; i < argc; i++) {
        char *end = NULL;
        if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc) {
            batch = strtol(argv[++i], &end, 10);
            if (*end || batch < 1 || batch > MAX_BATCH) return usage();
        } else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            seconds = strtod(argv[++i], &end);
            if (*end || !(seconds > 0)) return usage();
        } else {
            return usage();
        }
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    for (int i = 0; i < 2; i++)
        if (open_port(&ports[i]) < 0) return 1;

    static unsigned char bufs[MAX_BATCH][BUF_BYTES];
    static struct mmsghdr rx[MAX_BATCH], tx[MAX_BATCH];
    static struct iovec iov[MAX_BATCH], txiov[MAX_BATCH];
    for (int i = 0; i < MAX_BATCH; i++) {
        iov[i].iov_base = bufs[i];
        iov[i].iov_len = BUF_BYTES;
    }
    /* Ready: the bench waits for this line before it sends traffic. */
    printf("ready\n");
    fflush(stdout);

    double deadline = now_s() + seconds;
    struct pollfd pfd[2] = {{.fd = ports[0].fd, .events = POLLIN},
                            {.fd = ports[1].fd, .events = POLLIN}};
    int rc = 0;
    while (!stop) {
        double left = deadline - now_s();
        if (left <= 0) break;
        int timeout_ms = left > 0.1 ? 100 : (int)(left * 1000) + 1;
        int r = poll(pfd, 2, timeout_ms);
        if (r < 0) {
            if (errno == EINTR) continue;
            perror("afpacket_fwd: poll");
            rc = 1;
            break;
        }
        for (int i = 0; i < 2 && rc == 0; i++) {
            if (!(pfd[i].revents & POLLIN)) continue;
            struct port *in = &ports[i], *out = &ports[1 - i];
            if (batch == 1)
                rc = forward_single(in, out, bufs[0]) < 0;
            else
                rc = forward_batch(in, out, (unsigned)batch, rx, tx, iov, txiov) < 0;
        }
        if (rc) break;
    }
    printf("{\"batch\": %ld, \"%s\": {\"rx\": %llu, \"tx\": %llu, \"tx_err\": %llu, "
           "\"truncated\": %llu}, \"%s\": {\"rx\": %llu, \"tx\": %llu, \"tx_err\": %llu, "
           "\"truncated\": %llu}}\n",
           batch, ports[0].name, (unsigned long long)ports[0].rx,
           (unsigned long long)ports[0].tx, (unsigned long long)ports[0].tx_err,
           (unsigned long long)ports[0].trunc, ports[1].name, (unsigned long long)ports[1].rx,
           (unsigned long long)ports[1].tx, (unsigned long long)ports[1].tx_err,
           (unsigned long long)ports[1].trunc);
    for (int i = 0; i < 2; i++) close(ports[i].fd);
    return rc;
}
