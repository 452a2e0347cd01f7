// gradc's runtime, the part its own compiles share: the native backend's and gradc
// build --target=cpu's compile it once, into an object in the cache beside the
// precompiled headers (tools/native.cpp), and link it into every program. Where
// GRADC_RUNTIME_OBJECT is defined, the communicators declare their destructor here,
// so that their vtables, and with them every virtual function (the collectives, their
// loops for every dtype and op), are compiled in this object alone; and an
// executable's main (gradc_main.h: its command line, .npy files, text and JSON) is
// compiled here too. A small program then compiles in about half the time. The
// sources of `gradc emit` do not define it and stay header-only.
#define GRADC_RUNTIME_OBJECT_SOURCE
#include "gradc_prefix.h"  // the runtime's headers, as the programs compiled with it include them

namespace gradc {

ThreadComm::~ThreadComm() = default;
#if defined(GRADC_WITH_MPI)
MpiComm::~MpiComm() { release(); }
#endif

}  // namespace gradc
