#include "daemon_config.h"

#include <toml++/toml.h>
#include <algorithm>
#include <climits>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

namespace rootspec {

namespace {

// Sets one key; `value` is TOML text (e.g. 8, "root-draw", 0.7, true).
void apply(DaemonConfig& c, const std::string& section, const std::string& key, const toml::node& v,
           const std::string& where) {
  auto str = [&]() -> std::string {
    if (!v.is_string()) throw ConfigError(where + ": must be a string");
    return *v.value<std::string>();
  };
  auto integer = [&]() -> int {
    if (!v.is_integer()) throw ConfigError(where + ": must be an integer");
    const int64_t x = *v.value<int64_t>();
    // Never narrowed silently: 4294967304 must not load as 8.
    if (x < INT_MIN || x > INT_MAX) throw ConfigError(where + ": " + std::to_string(x) + " is out of range");
    return static_cast<int>(x);
  };
  auto number = [&]() -> double {
    if (!v.is_number()) throw ConfigError(where + ": must be a number");
    return *v.value<double>();
  };
  auto boolean = [&]() -> bool {
    if (!v.is_boolean()) throw ConfigError(where + ": must be true or false");
    return *v.value<bool>();
  };
  if (section == "target" || section == "drafter") {
    ProcessConfig& p = section == "target" ? c.target : c.drafter;
    if (key == "model") return void(p.model = str());
    if (key == "device") return void(p.device = str());
    if (key == "dtype") return void(p.dtype = str());
    if (key == "threads") return void(p.threads = integer());
    if (key == "cuda_graphs") return void(p.cuda_graphs = boolean());
    if (key == "attention") {
      p.attention = str();
      if (p.attention != "tensor-core" && p.attention != "simple")
        throw ConfigError(where + ": must be \"tensor-core\" or \"simple\"");
      return;
    }
    if (key == "idle_drafter_threads" && section == "target") return void(p.idle_drafter_threads = integer());
    if (key == "ar_uses_drafter_core" && section == "target") return void(p.ar_uses_drafter_core = boolean());
    if (key == "max_batch" && section == "target") return void(p.max_batch = integer());
    if (key == "prefix_cache_mb") return void(p.prefix_cache_mb = integer());
    if (key == "process_rows" && section == "drafter") return void(p.process_rows = boolean());
  } else if (section == "endpoints") {
    if (key == "client") return void(c.client_endpoint = str());
    if (key == "drafter") return void(c.drafter_endpoint = str());
    if (key == "pool_transport") return void(c.pool_transport = str());
  } else if (section == "decoding") {
    RequestOptions& d = c.decoding;
    if (key == "max_context") return void(c.max_context = integer());
    if (key == "max_new_tokens") return void(d.max_new_tokens = integer());
    if (key == "rule") {
      const std::string name = str();
      if (name == "oracle") throw ConfigError(where + ": oracle is for analysis only");
      if (!parse_decoder(name, &d))
        throw ConfigError(where + ": unknown rule '" + name + "' (" + decoder_names() + ")");
      return;
    }
    if (key == "verifier") {
      const std::string name = str();
      if (!parse_verifier(name, &d.verifier)) throw ConfigError(where + ": unknown verifier '" + name + "'");
      return;
    }
    if (key == "budget") return void(d.budget = integer());
    if (key == "temperature") return void(d.temperature = number());
    if (key == "stop_at_eos") return void(d.stop_at_eos = boolean());
    if (key == "auto_draft") return void(c.auto_draft = boolean());
    if (key == "logprobs_mode") {
      const std::string mode = str();
      if (mode != "processed" && mode != "raw")
        throw ConfigError(where + ": must be \"processed\" or \"raw\"");
      return void(d.logprobs_raw = mode == "raw");
    }
  } else if (section == "pool") {
    if (key == "kind") {
      const std::string kind = str();
      if (kind != "topk" && kind != "rheo") throw ConfigError(where + ": must be \"topk\" or \"rheo\"");
      if (kind == "topk")
        c.pool.rheo_m = -1;
      else if (c.pool.rheo_m < 0)
        c.pool.rheo_m = 1;
      return;
    }
    if (key == "top_k") return void(c.pool.top_k = integer());
    if (key == "depth") return void(c.pool.depth = integer());
    if (key == "expand") return void(c.pool.expand = integer());
    if (key == "sparse") return void(c.pool.sparse = integer());
    if (key == "rheo_m") return void(c.pool.rheo_m = integer());
    if (key == "draft_ahead") return void(c.draft_ahead = boolean());
    if (key == "adaptive_depth") return void(c.pool.adaptive_depth = boolean());
  } else if (section == "limits") {
    if (key == "peer_timeout_s") return void(c.peer_timeout_s = number());
  } else if (section == "http") {
    if (key == "listen") return void(c.http.listen = str());
    if (key == "api_key") return void(c.http.api_key = str());
    if (key == "max_body_bytes") return void(c.http.max_body_bytes = integer());
    if (key == "queue_depth") return void(c.http.queue_depth = integer());
    if (key == "model_name") return void(c.http.model_name = str());
    if (key == "request_timeout_s") return void(c.http.request_timeout_s = number());
    if (key == "max_header_bytes") return void(c.http.max_header_bytes = integer());
    if (key == "header_timeout_s") return void(c.http.header_timeout_s = number());
    if (key == "body_timeout_s") return void(c.http.body_timeout_s = number());
    if (key == "write_timeout_s") return void(c.http.write_timeout_s = number());
    if (key == "max_connections") return void(c.http.max_connections = integer());
    if (key == "max_connections_per_client") return void(c.http.max_connections_per_client = integer());
  } else if (section == "log") {
    if (key == "level") return void(c.log_level = str());
  } else {
    throw ConfigError(where + ": unknown section [" + section + "]");
  }
  throw ConfigError(where + ": unknown key");
}

}  // namespace

DaemonConfig DaemonConfig::load(const std::string& path, const std::vector<std::string>& overrides) {
  if (path.empty()) return parse("", "", std::filesystem::current_path().string(), overrides);
  std::ifstream f(path, std::ios::binary);
  if (!f) throw ConfigError(path + ": cannot open");
  std::ostringstream text;
  text << f.rdbuf();
  return parse(text.str(), path, std::filesystem::absolute(path).parent_path().string(), overrides);
}

DaemonConfig DaemonConfig::parse(const std::string& toml_text, const std::string& path,
                                 const std::string& base, const std::vector<std::string>& overrides) {
  DaemonConfig c;
  if (!toml_text.empty()) {
    toml::table t;
    try {
      t = toml::parse(toml_text, path);
    } catch (const toml::parse_error& e) {
      std::ostringstream msg;
      msg << path << ":" << e.source().begin.line << ": " << e.description();
      throw ConfigError(msg.str());
    }
    // [pool] kind first, so that rheo_m given alongside it wins.
    for (const auto& [sec, node] : t) {
      const std::string section(sec.str());
      if (!node.is_table()) throw ConfigError(path + ": " + section + " must be a [section]");
      const toml::table& tab = *node.as_table();
      if (const toml::node* kind = tab.get("kind"); kind && section == "pool")
        apply(c, section, "kind", *kind, path + ": pool.kind");
      for (const auto& [k, v] : tab) {
        const std::string key(k.str());
        if (section == "pool" && key == "kind") continue;
        apply(c, section, key, v, path + ": " + section + "." + key);
      }
    }
  }
  for (const std::string& o : overrides) {
    const size_t eq = o.find('='), dot = o.find('.');
    if (eq == std::string::npos || dot == std::string::npos || dot > eq)
      throw ConfigError("--set " + o + ": want section.key=value");
    const std::string section = o.substr(0, dot), key = o.substr(dot + 1, eq - dot - 1);
    const std::string value = o.substr(eq + 1);
    toml::table parsed;
    try {
      parsed = toml::parse("v = " + value);
    } catch (const toml::parse_error&) {
      parsed = toml::table{{"v", value}};  // an unquoted word: a string
    }
    apply(c, section, key, *parsed.get("v"), "--set " + section + "." + key);
  }
  for (ProcessConfig* p : {&c.target, &c.drafter})
    if (!p->model.empty() && std::filesystem::path(p->model).is_relative())
      p->model = (std::filesystem::path(base) / p->model).lexically_normal().string();
  return c;
}

void DaemonConfig::validate() const {
  if (const OptionProblem p = check_request_options(decoding))
    throw ConfigError("decoding." + p.option + ": " + p.message);
  if (max_context < 2) throw ConfigError("decoding.max_context: must be at least 2");
  if (pool.top_k < 1) throw ConfigError("pool.top_k: must be at least 1");
  if (pool.depth < 1) throw ConfigError("pool.depth: must be at least 1");
  if (pool.expand < 1) throw ConfigError("pool.expand: must be at least 1");
  if (pool.rheo_m >= pool.top_k) throw ConfigError("pool.rheo_m: must be below top_k");
  if (pool.sparse < 0) throw ConfigError("pool.sparse: must be at least 0");
  if (target.threads < 1) throw ConfigError("target.threads: must be at least 1");
  if (drafter.threads < 1) throw ConfigError("drafter.threads: must be at least 1");
  if (target.idle_drafter_threads < 1 || target.idle_drafter_threads > 64)
    throw ConfigError("target.idle_drafter_threads: must be in [1, 64]");
  if (target.prefix_cache_mb < 0) throw ConfigError("target.prefix_cache_mb: must be 0 (off) or more");
  if (drafter.prefix_cache_mb < 0) throw ConfigError("drafter.prefix_cache_mb: must be 0 (off) or more");
  if (target.max_batch < 1 || target.max_batch > kMaxBatch)
    throw ConfigError("target.max_batch: must be in [1, " + std::to_string(kMaxBatch) + "]");
  // A batched tree pass holds whole trees of at most one pass (kMaxTreeBucket = 64 rows: the anchor
  // and B nodes); batch one runs larger trees in several passes.
  if (target.max_batch > 1 && decoding.budget > 63)
    throw ConfigError(
        "decoding.budget: at most 63 with target.max_batch > 1 (a batched tree pass holds 64 rows)");
  if (!(peer_timeout_s > 0)) throw ConfigError("limits.peer_timeout_s: must be positive");
  http.host_port();
  if (http.max_body_bytes < 1024) throw ConfigError("http.max_body_bytes: must be at least 1024");
  if (http.queue_depth < 1) throw ConfigError("http.queue_depth: must be at least 1");
  if (!(http.request_timeout_s > 0)) throw ConfigError("http.request_timeout_s: must be positive");
  if (http.max_header_bytes < 1024) throw ConfigError("http.max_header_bytes: must be at least 1024");
  for (const auto& [name, seconds] : {std::pair<const char*, double>{"header_timeout_s", http.header_timeout_s},
                                      {"body_timeout_s", http.body_timeout_s},
                                      {"write_timeout_s", http.write_timeout_s}})
    if (!(seconds > 0)) throw ConfigError(std::string("http.") + name + ": must be positive");
  if (http.max_connections < 1) throw ConfigError("http.max_connections: must be at least 1");
  if (http.max_connections_per_client < 1)
    throw ConfigError("http.max_connections_per_client: must be at least 1");
  const std::vector<std::string> levels = {"trace", "debug", "info", "warn", "error", "critical", "off"};
  if (std::find(levels.begin(), levels.end(), log_level) == levels.end())
    throw ConfigError("log.level: must be trace, debug, info, warn, error, critical or off");
  if (pool_transport != "auto" && pool_transport != "zmq" && pool_transport != "nccl" &&
      pool_transport != "shm")
    throw ConfigError("endpoints.pool_transport: must be \"auto\", \"zmq\", \"nccl\" or \"shm\"");
}

std::pair<std::string, int> HttpConfig::host_port() const {
  const size_t colon = listen.rfind(':');
  int port = -1;
  if (colon != std::string::npos && colon > 0) {
    try {
      size_t used = 0;
      port = std::stoi(listen.substr(colon + 1), &used);
      if (used != listen.size() - colon - 1) port = -1;
    } catch (const std::exception&) {
      port = -1;
    }
  }
  if (port < 0 || port > 65535) throw ConfigError("http.listen: want \"host:port\", got \"" + listen + "\"");
  return {listen.substr(0, colon), port};
}

}  // namespace rootspec
