#include "routes.h"

#include <array>
#include <utility>

namespace rootspec {

namespace http = boost::beast::http;

std::string path_of(const HttpRequest& request) {
  const std::string target(request.target());
  return target.substr(0, target.find('?'));
}

Route route_of(const HttpRequest& request, const std::string& api_key) {
  const std::string path = path_of(request);
  if (!api_key.empty() && path.rfind("/v1/", 0) == 0 &&
      std::string(request[http::field::authorization]) != "Bearer " + api_key)
    throw openai::HttpError{401, "Incorrect or missing API key (Authorization: Bearer …)", "invalid_request_error",
                            "", "invalid_api_key"};
  static const std::array<std::pair<const char*, std::pair<http::verb, Route>>, 5> routes = {{
      {"/v1/models", {http::verb::get, Route::Models}},
      {"/health", {http::verb::get, Route::Health}},
      {"/metrics", {http::verb::get, Route::Metrics}},
      {"/v1/completions", {http::verb::post, Route::Completions}},
      {"/v1/chat/completions", {http::verb::post, Route::ChatCompletions}},
  }};
  for (const auto& [name, route] : routes) {
    if (path != name) continue;
    if (request.method() != route.first)
      throw openai::HttpError{405, std::string(request.method_string()) + " " + path + ": use " +
                                       std::string(http::to_string(route.first)),
                              "invalid_request_error", "", "method_not_allowed"};
    return route.second;
  }
  throw openai::HttpError{404, "no route " + std::string(request.method_string()) + " " + path,
                          "invalid_request_error", "", "not_found"};
}

}  // namespace rootspec
