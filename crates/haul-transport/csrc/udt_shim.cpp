// A tiny extern "C" API over UDT4 (udt.h from Debian's libudt-dev) for haul-transport's `udt`
// module (used by haul cp / haul serve data channels and by haul profile).
// Every function returns a negative value on failure; hu_last_error() describes it.
//
// libudt is loaded with dlopen on the first hu_startup, not linked: its static initializer
// sleeps 100 ms (CTimer measures the CPU clock), which every haul command paid at start, UDT
// or not. Only a process that opens a UDT socket pays it now, and a haul built with udt.h runs
// on a host without libudt0 until UDT is asked for. The functions are looked up by their
// Itanium C++ names, which the header's declarations type.
#include <udt.h>
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <stdint.h>

namespace {

struct Udt {
    decltype(&UDT::startup) startup;
    decltype(&UDT::getlasterror_desc) last_desc;
    decltype(&UDT::getlasterror_code) last_code;
    decltype(&UDT::socket) socket;
    decltype(&UDT::setsockopt) setsockopt;
    decltype(&UDT::bind) bind;
    decltype(&UDT::getsockname) getsockname;
    decltype(&UDT::listen) listen;
    decltype(&UDT::accept) accept;
    decltype(&UDT::connect) connect;
    decltype(&UDT::send) send;
    decltype(&UDT::recv) recv;
    decltype(&UDT::close) close;
    decltype(&UDT::perfmon) perfmon;
};

Udt udt;
// Why loading failed, if it did.
char load_error[512];

// Looks up one function; false (with the reason kept) if it is missing.
template <typename F> bool sym(void* lib, F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(lib, name));
    if (!f) snprintf(load_error, sizeof load_error, "libudt.so.0 lacks %s", name);
    return f != nullptr;
}

bool load() {
    void* lib = dlopen("libudt.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char* e = dlerror();
        snprintf(load_error, sizeof load_error, "cannot load the UDT4 library (install libudt0): %s",
                 e ? e : "dlopen failed");
        return false;
    }
    return sym(lib, udt.startup, "_ZN3UDT7startupEv") &&
           sym(lib, udt.last_desc, "_ZN3UDT17getlasterror_descEv") &&
           sym(lib, udt.last_code, "_ZN3UDT17getlasterror_codeEv") &&
           sym(lib, udt.socket, "_ZN3UDT6socketEiii") &&
           sym(lib, udt.setsockopt, "_ZN3UDT10setsockoptEii6UDTOptPKvi") &&
           sym(lib, udt.bind, "_ZN3UDT4bindEiPK8sockaddri") &&
           sym(lib, udt.getsockname, "_ZN3UDT11getsocknameEiP8sockaddrPi") &&
           sym(lib, udt.listen, "_ZN3UDT6listenEii") &&
           sym(lib, udt.accept, "_ZN3UDT6acceptEiP8sockaddrPi") &&
           sym(lib, udt.connect, "_ZN3UDT7connectEiPK8sockaddri") &&
           sym(lib, udt.send, "_ZN3UDT4sendEiPKcii") &&
           sym(lib, udt.recv, "_ZN3UDT4recvEiPcii") &&
           sym(lib, udt.close, "_ZN3UDT5closeEi") &&
           sym(lib, udt.perfmon, "_ZN3UDT7perfmonEiP8CPerfMonb");
}

bool loaded = false;

}  // namespace

extern "C" {

// Loads and starts the UDT library. Called once per process (haul-transport keeps it to one
// call) before any other function here; on failure hu_last_error() says why and nothing else
// may be called.
int hu_startup(void) {
    loaded = load();
    return loaded ? udt.startup() : -1;
}

// The last error of the calling thread.
const char* hu_last_error(void) { return loaded ? udt.last_desc() : load_error; }

// A new UDT stream socket for the address family (AF_INET or AF_INET6).
int hu_socket(int af) { return udt.socket(af, SOCK_STREAM, 0); }

// Option codes as seen from Rust: 0 UDT_MSS, 1 UDT_SNDBUF, 2 UDT_RCVBUF, 3 UDP_SNDBUF,
// 4 UDP_RCVBUF, 5 UDT_MAXBW (bytes/s, int64), 6 UDT_RCVTIMEO (ms), 7 UDT_SNDTIMEO (ms),
// 8 UDT_RCVSYN (0 = non-blocking accept / recv), 9 UDT_LINGER (seconds; 0 = close at once,
// dropping unsent data).
int hu_setopt(int s, int which, int64_t value) {
    int v = (int)value;
    switch (which) {
    case 0: return udt.setsockopt(s, 0, UDT_MSS, &v, sizeof v);
    case 1: return udt.setsockopt(s, 0, UDT_SNDBUF, &v, sizeof v);
    case 2: return udt.setsockopt(s, 0, UDT_RCVBUF, &v, sizeof v);
    case 3: return udt.setsockopt(s, 0, UDP_SNDBUF, &v, sizeof v);
    case 4: return udt.setsockopt(s, 0, UDP_RCVBUF, &v, sizeof v);
    case 5: { int64_t bw = value; return udt.setsockopt(s, 0, UDT_MAXBW, &bw, sizeof bw); }
    case 6: return udt.setsockopt(s, 0, UDT_RCVTIMEO, &v, sizeof v);
    case 7: return udt.setsockopt(s, 0, UDT_SNDTIMEO, &v, sizeof v);
    case 8: { bool b = v != 0; return udt.setsockopt(s, 0, UDT_RCVSYN, &b, sizeof b); }
    case 9: {
        struct linger l;
        l.l_onoff = v > 0;
        l.l_linger = v > 0 ? v : 0;
        return udt.setsockopt(s, 0, UDT_LINGER, &l, sizeof l);
    }
    default: return -1;
    }
}

// Binds to a sockaddr given as raw bytes.
int hu_bind(int s, const void* addr, int len) {
    return udt.bind(s, (const struct sockaddr*)addr, len);
}

// The bound port of a socket, or -1.
int hu_port(int s) {
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (udt.getsockname(s, (struct sockaddr*)&ss, &len) < 0) return -1;
    if (ss.ss_family == AF_INET) return ntohs(((struct sockaddr_in*)&ss)->sin_port);
    if (ss.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6*)&ss)->sin6_port);
    return -1;
}

// Listens with the given backlog.
int hu_listen(int s, int backlog) { return udt.listen(s, backlog); }

// Accepts one connection; returns the new socket and writes the peer's sockaddr into `peer`
// (`*len` bytes available; set to the bytes written). With UDT_RCVSYN off it fails at once
// (code 6002) when no connection is waiting.
int hu_accept(int s, void* peer, int* len) {
    return udt.accept(s, (struct sockaddr*)peer, len);
}

// Connects to a sockaddr given as raw bytes.
int hu_connect(int s, const void* addr, int len) {
    return udt.connect(s, (const struct sockaddr*)addr, len);
}

// Sends up to len bytes; returns the count sent.
int hu_send(int s, const char* buf, int len) { return udt.send(s, buf, len, 0); }

// Receives up to len bytes; returns the count, or -1 (see hu_last_error_code: 6003 = timeout).
int hu_recv(int s, char* buf, int len) { return udt.recv(s, buf, len, 0); }

// The code of the last error (UDT::ERRORINFO codes; 2001 = connection broken, 6003 = timeout).
int hu_last_error_code(void) { return loaded ? udt.last_code() : -1; }

// Closes a socket.
int hu_close(int s) { return udt.close(s); }

// Cumulative statistics: RTT (ms), send rate (Mb/s), retransmitted and lost packets.
int hu_perfmon(int s, double* rtt_ms, double* send_mbps, int64_t* retrans, int64_t* lost) {
    UDT::TRACEINFO t;
    if (udt.perfmon(s, &t, false) < 0) return -1;
    *rtt_ms = t.msRTT;
    *send_mbps = t.mbpsSendRate;
    *retrans = t.pktRetransTotal;
    *lost = t.pktSndLossTotal;
    return 0;
}

}
