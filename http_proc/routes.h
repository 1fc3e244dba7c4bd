// Which of rootspec-http's routes a request names, and whether it may: the API key guards /v1/*
// (Authorization: Bearer …), /health and /metrics stay open to probes. Pure, so that the fuzz
// harness reads requests exactly as the gateway does.
#pragma once

#include <string>

#include "http_server.h"
#include "openai.h"

namespace rootspec {

enum class Route { Models, Health, Metrics, Completions, ChatCompletions };

// The route of `request`; throws openai::HttpError: 401 (a wrong or missing key, when `api_key` is
// set), 404 (no such route), 405 (a route asked with another method).
Route route_of(const HttpRequest& request, const std::string& api_key);
// The path without its query string: "/health?x=1" → "/health".
std::string path_of(const HttpRequest& request);

}  // namespace rootspec
