// DaemonConfig: what `rootspec-target` and `rootspec-drafter` run with, from a TOML file
// (configs/*.toml) with `--set section.key=value` overrides
// (docs/design.md#processes-and-messages).
//
//   [target]   model, device, dtype, threads, idle_drafter_threads (CPU: threads of the passes
//              that run while the drafter waits: tree passes and `ar`; see cpu_workers.h),
//              ar_uses_drafter_core (false: `ar` stays on the target's own threads), max_batch
//              (requests decoded at once, each round one root pass and one tree pass over all of
//              them; the rest wait in arrival order; the drafter keeps as many sessions)
//              cuda_graphs (on a cuda device: false runs every pass eagerly), attention (on a cuda
//              device: "tensor-core", the default, or "simple", the reference kernel)
//   [drafter]  model, device, dtype, threads, cuda_graphs, attention, process_rows (default true:
//              with a request's sampling parameters the drafter processes its draft rows the way
//              the target processes its own, docs/design.md#the-processed-target-law,
//              runtime_drafter.h; false: raw draft rows)
//   [endpoints] client (target binds; clients connect), drafter (drafter binds; target connects),
//              pool_transport ("auto": shared memory for the per-request messages and pools
//              when the drafter endpoint is on this host, whatever devices the processes use
//              (shm_channel.h), else ZeroMQ; "zmq"; "shm"; "nccl": pools device to device over
//              NCCL, the two processes on CUDA devices)
//   [decoding] max_context, and a request's defaults (request.h: RequestOptions): max_new_tokens,
//              rule, verifier, budget, temperature, stop_at_eos, logprobs_mode ("processed",
//              the default: logprobs report the processed law p̃ that the tokens are drawn from,
//              docs/design.md#the-processed-target-law; "raw": the target's own law at T = 1,
//              nothing applied); auto_draft (default true: `auto` may choose draft, which skips the
//              root pass; false: root-draw or ar only, decoding_policy.h)
//   [pool]     kind ("topk" | "rheo"), top_k, depth, expand, rheo_m, sparse, adaptive_depth
//              (default true: each pool as deep as the request's recent Commits suggest, within
//              depth; runtime_drafter.h), draft_ahead (a request's default: the drafter grows the
//              most probable next Commit's pool while the target verifies; runtime_drafter.h)
//   [limits]   peer_timeout_s (a silent peer past this is treated as dead)
//   [http]     the gateway (rootspec-http) and the target's queue: listen ("host:port", port 0:
//              any free one), api_key (empty: none; the environment's ROOTSPEC_API_KEY wins),
//              max_body_bytes, queue_depth (Generates waiting in the target; more get 429),
//              model_name (empty: the target folder's name), request_timeout_s
//   [log]      level (trace, debug, info, warn, error; --log-level overrides)
//
// Relative model paths are resolved against the config file's folder.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "pool.h"
#include "request.h"

namespace rootspec {

constexpr int kMaxBatch = 64;  // [target] max_batch's ceiling: one pass holds ≤ 64 rows

struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct ProcessConfig {
  std::string model;
  std::string device = "cpu";
  std::string dtype = "float32";
  int threads = 1;
  int idle_drafter_threads = 1;           // target on the CPU: threads while the drafter's core idles
  bool ar_uses_drafter_core = true;       // target: `ar` passes use idle_drafter_threads too
  int max_batch = 1;                      // target: requests decoded at once (1: one at a time)
  bool cuda_graphs = true;                // on a cuda device: replay captured graphs (false: eager passes)
  std::string attention = "tensor-core";  // on a cuda device: tree attention's kernel ("simple")
  bool process_rows = true;               // drafter: process draft rows by the request's sampling parameters
  int prefix_cache_mb = 512;              // committed K/V of prompt prefixes kept for reuse (0: off)
};

struct HttpConfig {
  std::string listen = "127.0.0.1:8000";
  std::string api_key;
  int max_body_bytes = 1 << 20;
  int queue_depth = 64;
  std::string model_name;
  double request_timeout_s = 600.0;
  // The front end's limits (http_server.h): a connection's request header within
  // header_timeout_s of its opening (or of its previous response: the keep-alive wait), its body
  // within body_timeout_s, every write within write_timeout_s; a header past max_header_bytes is
  // 431. Connections past max_connections in all or max_connections_per_client from one address
  // are answered 503 and closed.
  int max_header_bytes = 16 * 1024;
  double header_timeout_s = 30.0;
  double body_timeout_s = 60.0;
  double write_timeout_s = 60.0;
  int max_connections = 10000;
  int max_connections_per_client = 4096;
  // host and port of `listen`; throws ConfigError naming http.listen.
  std::pair<std::string, int> host_port() const;
};

struct DaemonConfig {
  ProcessConfig target, drafter;
  std::string client_endpoint = "tcp://127.0.0.1:5600";
  std::string drafter_endpoint = "tcp://127.0.0.1:5601";
  std::string pool_transport = "auto";
  int max_context = 2048;
  // What a Generate leaves out ([decoding]; seed stays 0). The decoder defaults to `auto`
  // (decoding_policy.h): the mode and budget of the most expected tokens per unit of time.
  RequestOptions decoding = [] {
    RequestOptions o;
    o.auto_rule = true;
    return o;
  }();
  PoolShape pool = [] {
    PoolShape s;
    s.adaptive_depth = true;
    return s;
  }();
  bool auto_draft = true;    // [decoding] auto_draft
  bool draft_ahead = false;  // [pool] draft_ahead: pays where the drafter has a core (or GPU) of its own
  double peer_timeout_s = 60.0;
  HttpConfig http;
  std::string log_level = "info";

  // Reads `path` (may be empty: defaults only), then applies "section.key=value" overrides.
  // Throws ConfigError naming the file, key and problem.
  static DaemonConfig load(const std::string& path, const std::vector<std::string>& overrides);
  // The same from a file's text: `path` names it in errors, relative model folders are resolved
  // against `base`.
  static DaemonConfig parse(const std::string& toml_text, const std::string& path, const std::string& base,
                            const std::vector<std::string>& overrides);
  // Checks values (rule and verifier names, ranges); throws ConfigError naming the key.
  void validate() const;
};

}  // namespace rootspec
