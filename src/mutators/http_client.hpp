// A JSON POST over libcurl, with a per-request time limit: what the model mutator needs of HTTP.
#pragma once
#include <string>
#include <vector>

namespace kernelevolve::mutators {

struct HttpResponse {
  long status = 0;  // 0 when the request never got an answer
  std::string body;
  std::string error;          // transport failure (curl's message), when status == 0
  double retry_after_s = -1;  // the Retry-After header, in seconds, when present
};

// POSTs `body` to `url` with the given extra headers ("Name: value"). Never throws for network trouble.
HttpResponse http_post_json(const std::string& url, const std::vector<std::string>& headers, const std::string& body,
                            double timeout_s);

}  // namespace kernelevolve::mutators
