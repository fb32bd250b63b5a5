// A tiny extern "C" API over UDT4 (udt.h from Debian's libudt-dev) for haul-transport's `udt`
// module (used by haul cp / haul serve data channels and by haul profile).
// Every function returns a negative value on failure; hu_last_error() describes it.
#include <udt.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <stdint.h>

extern "C" {

// Starts the UDT library (idempotent per process).
int hu_startup(void) { return UDT::startup(); }

// The last error of the calling thread.
const char* hu_last_error(void) { return UDT::getlasterror_desc(); }

// A new UDT stream socket for the address family (AF_INET or AF_INET6).
int hu_socket(int af) { return UDT::socket(af, SOCK_STREAM, 0); }

// Option codes as seen from Rust: 0 UDT_MSS, 1 UDT_SNDBUF, 2 UDT_RCVBUF, 3 UDP_SNDBUF,
// 4 UDP_RCVBUF, 5 UDT_MAXBW (bytes/s, int64), 6 UDT_RCVTIMEO (ms), 7 UDT_SNDTIMEO (ms),
// 8 UDT_RCVSYN (0 = non-blocking accept / recv), 9 UDT_LINGER (seconds; 0 = close at once,
// dropping unsent data).
int hu_setopt(int s, int which, int64_t value) {
    int v = (int)value;
    switch (which) {
    case 0: return UDT::setsockopt(s, 0, UDT_MSS, &v, sizeof v);
    case 1: return UDT::setsockopt(s, 0, UDT_SNDBUF, &v, sizeof v);
    case 2: return UDT::setsockopt(s, 0, UDT_RCVBUF, &v, sizeof v);
    case 3: return UDT::setsockopt(s, 0, UDP_SNDBUF, &v, sizeof v);
    case 4: return UDT::setsockopt(s, 0, UDP_RCVBUF, &v, sizeof v);
    case 5: { int64_t bw = value; return UDT::setsockopt(s, 0, UDT_MAXBW, &bw, sizeof bw); }
    case 6: return UDT::setsockopt(s, 0, UDT_RCVTIMEO, &v, sizeof v);
    case 7: return UDT::setsockopt(s, 0, UDT_SNDTIMEO, &v, sizeof v);
    case 8: { bool b = v != 0; return UDT::setsockopt(s, 0, UDT_RCVSYN, &b, sizeof b); }
    case 9: {
        struct linger l;
        l.l_onoff = v > 0;
        l.l_linger = v > 0 ? v : 0;
        return UDT::setsockopt(s, 0, UDT_LINGER, &l, sizeof l);
    }
    default: return -1;
    }
}

// Binds to a sockaddr given as raw bytes.
int hu_bind(int s, const void* addr, int len) {
    return UDT::bind(s, (const struct sockaddr*)addr, len);
}

// The bound port of a socket, or -1.
int hu_port(int s) {
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (UDT::getsockname(s, (struct sockaddr*)&ss, &len) < 0) return -1;
    if (ss.ss_family == AF_INET) return ntohs(((struct sockaddr_in*)&ss)->sin_port);
    if (ss.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6*)&ss)->sin6_port);
    return -1;
}

// Listens with the given backlog.
int hu_listen(int s, int backlog) { return UDT::listen(s, backlog); }

// Accepts one connection; returns the new socket and writes the peer's sockaddr into `peer`
// (`*len` bytes available; set to the bytes written). With UDT_RCVSYN off it fails at once
// (code 6002) when no connection is waiting.
int hu_accept(int s, void* peer, int* len) {
    return UDT::accept(s, (struct sockaddr*)peer, len);
}

// Connects to a sockaddr given as raw bytes.
int hu_connect(int s, const void* addr, int len) {
    return UDT::connect(s, (const struct sockaddr*)addr, len);
}

// Sends up to len bytes; returns the count sent.
int hu_send(int s, const char* buf, int len) { return UDT::send(s, buf, len, 0); }

// Receives up to len bytes; returns the count, or -1 (see hu_last_error_code: 6003 = timeout).
int hu_recv(int s, char* buf, int len) { return UDT::recv(s, buf, len, 0); }

// The code of the last error (UDT::ERRORINFO codes; 2001 = connection broken, 6003 = timeout).
int hu_last_error_code(void) { return UDT::getlasterror_code(); }

// Closes a socket.
int hu_close(int s) { return UDT::close(s); }

// Cumulative statistics: RTT (ms), send rate (Mb/s), retransmitted and lost packets.
int hu_perfmon(int s, double* rtt_ms, double* send_mbps, int64_t* retrans, int64_t* lost) {
    UDT::TRACEINFO t;
    if (UDT::perfmon(s, &t, false) < 0) return -1;
    *rtt_ms = t.msRTT;
    *send_mbps = t.mbpsSendRate;
    *retrans = t.pktRetransTotal;
    *lost = t.pktSndLossTotal;
    return 0;
}

}
