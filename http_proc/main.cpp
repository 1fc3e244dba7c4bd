// rootspec-http: the OpenAI-compatible HTTP gateway in front of the target (gateway.h). Usually
// started by launch/rootspec up with the pair.
//   rootspec-http --config configs/X.toml [--set http.listen=127.0.0.1:8000 …] [--log-level debug]
#include <malloc.h>

#include "daemon_main.h"
#include "gateway.h"

int main(int argc, char** argv) {
  // Dozens of pool threads each allocate a little: glibc would give them up to 8 arenas per core,
  // whose fragmentation grew the resident size by ~40 % over the soak's first 6000 requests
  // (bench/soak, no leak under LeakSanitizer). Two arenas serve this load without contention.
  mallopt(M_ARENA_MAX, 2);
  return rootspec::daemon_main(argc, argv, "rootspec-http",
                               "an OpenAI-compatible HTTP front end of the target",
                               [](const rootspec::DaemonConfig& config) {
                                 rootspec::Gateway gateway(config);
                                 return gateway.run();
                               });
}
