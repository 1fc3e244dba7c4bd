// rootspec-http: the OpenAI-compatible HTTP gateway in front of the target (gateway.h). Usually
// started by launch/rootspec up with the pair.
//   rootspec-http --config configs/X.toml [--set http.listen=127.0.0.1:8000 …] [--log-level debug]
#include "daemon_main.h"
#include "gateway.h"

int main(int argc, char** argv) {
  return rootspec::daemon_main(argc, argv, "rootspec-http",
                               "an OpenAI-compatible HTTP front end of the target",
                               [](const rootspec::DaemonConfig& config) {
                                 rootspec::Gateway gateway(config);
                                 return gateway.run();
                               });
}
