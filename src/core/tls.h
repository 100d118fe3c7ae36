// Internal: TC_TLS_FAST, for the thread-local flags read on every op call (autocast,
// profiler). initial-exec TLS: the general-dynamic model of a shared library would cost a
// __tls_get_addr call each time. The library is linked, not dlopen'ed late, so the static
// TLS block has room for them.
#pragma once

#if defined(__GNUC__)
#define TC_TLS_FAST __attribute__((tls_model("initial-exec")))
#else
#define TC_TLS_FAST
#endif
