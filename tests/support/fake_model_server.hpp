// A model server on loopback, written for the tests: it answers each HTTP request with the next
// scripted reply (status, headers, body, delay) and records what it was asked.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ke_test {

struct Reply {
  int status = 200;
  std::string body;
  std::vector<std::string> headers;  // "Name: value"
  int delay_ms = 0;
};

struct Request {
  std::string path;
  std::string headers;
  std::string body;
};

class FakeModelServer {
 public:
  FakeModelServer() {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::listen(listen_fd_, 16);
    socklen_t len = sizeof addr;
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeModelServer() {
    stop_ = true;
    thread_.join();
    ::close(listen_fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  void push(Reply r) {
    std::lock_guard lock(mutex_);
    replies_.push_back(std::move(r));
  }
  std::vector<Request> requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
  }

  // A chat-completions body whose answer is `content`.
  static std::string openai(const std::string& content, int tokens = 100) {
    return "{\"choices\": [{\"message\": {\"role\": \"assistant\", \"content\": " + quote(content) +
           "}}], \"usage\": {\"prompt_tokens\": 10, \"completion_tokens\": " + std::to_string(tokens - 10) +
           ", \"total_tokens\": " + std::to_string(tokens) + "}}";
  }
  static std::string anthropic(const std::string& content, int in = 30, int out = 70) {
    return "{\"content\": [{\"type\": \"text\", \"text\": " + quote(content) +
           "}], \"usage\": {\"input_tokens\": " + std::to_string(in) + ", \"output_tokens\": " + std::to_string(out) +
           "}}";
  }
  static std::string quote(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') out += '\\', out += c;
      else if (c == '\n') out += "\\n";
      else out += c;
    }
    return out + "\"";
  }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) continue;
      handle(fd);
      ::close(fd);
    }
  }
  void handle(int fd) {
    std::string data;
    char buf[65536];
    std::size_t header_end = std::string::npos, need = 0;
    while (true) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return;
      data.append(buf, static_cast<std::size_t>(n));
      if (header_end == std::string::npos) {
        header_end = data.find("\r\n\r\n");
        if (header_end == std::string::npos) continue;
        const auto cl = data.find("Content-Length: ");
        need = cl == std::string::npos ? 0 : std::stoul(data.substr(cl + 16));
      }
      if (data.size() >= header_end + 4 + need) break;
    }
    Request req;
    const auto first_space = data.find(' ');
    req.path = data.substr(first_space + 1, data.find(' ', first_space + 1) - first_space - 1);
    req.headers = data.substr(0, header_end);
    req.body = data.substr(header_end + 4, need);
    Reply reply;
    {
      std::lock_guard lock(mutex_);
      requests_.push_back(req);
      if (!replies_.empty()) {
        reply = replies_.front();
        replies_.pop_front();
      } else {
        reply = {500, "{\"error\": \"no scripted reply\"}", {}, 0};
      }
    }
    if (reply.delay_ms > 0) {
      // Sleep in slices so the server stops promptly when the test ends.
      for (int waited = 0; waited < reply.delay_ms && !stop_; waited += 20) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    std::string out = "HTTP/1.1 " + std::to_string(reply.status) +
                      " X\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(reply.body.size()) +
                      "\r\nConnection: close\r\n";
    for (const auto& h : reply.headers) out += h + "\r\n";
    out += "\r\n" + reply.body;
    ::send(fd, out.data(), out.size(), MSG_NOSIGNAL);
  }

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex mutex_;
  std::deque<Reply> replies_;
  std::vector<Request> requests_;
};

}  // namespace ke_test
