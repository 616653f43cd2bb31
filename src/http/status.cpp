// Reason phrases of RFC 9110 section 15.
#include "weft/http/status.hpp"

namespace weft::http {

std::string_view reason_phrase(status code) noexcept {
  switch (code) {
    case status::continue_:
      return "Continue";
    case status::switching_protocols:
      return "Switching Protocols";
    case status::ok:
      return "OK";
    case status::created:
      return "Created";
    case status::accepted:
      return "Accepted";
    case status::non_authoritative_information:
      return "Non-Authoritative Information";
    case status::no_content:
      return "No Content";
    case status::reset_content:
      return "Reset Content";
    case status::partial_content:
      return "Partial Content";
    case status::multiple_choices:
      return "Multiple Choices";
    case status::moved_permanently:
      return "Moved Permanently";
    case status::found:
      return "Found";
    case status::see_other:
      return "See Other";
    case status::not_modified:
      return "Not Modified";
    case status::temporary_redirect:
      return "Temporary Redirect";
    case status::permanent_redirect:
      return "Permanent Redirect";
    case status::bad_request:
      return "Bad Request";
    case status::unauthorized:
      return "Unauthorized";
    case status::payment_required:
      return "Payment Required";
    case status::forbidden:
      return "Forbidden";
    case status::not_found:
      return "Not Found";
    case status::method_not_allowed:
      return "Method Not Allowed";
    case status::not_acceptable:
      return "Not Acceptable";
    case status::proxy_authentication_required:
      return "Proxy Authentication Required";
    case status::request_timeout:
      return "Request Timeout";
    case status::conflict:
      return "Conflict";
    case status::gone:
      return "Gone";
    case status::length_required:
      return "Length Required";
    case status::precondition_failed:
      return "Precondition Failed";
    case status::content_too_large:
      return "Content Too Large";
    case status::uri_too_long:
      return "URI Too Long";
    case status::unsupported_media_type:
      return "Unsupported Media Type";
    case status::range_not_satisfiable:
      return "Range Not Satisfiable";
    case status::expectation_failed:
      return "Expectation Failed";
    case status::misdirected_request:
      return "Misdirected Request";
    case status::unprocessable_content:
      return "Unprocessable Content";
    case status::upgrade_required:
      return "Upgrade Required";
    case status::precondition_required:
      return "Precondition Required";
    case status::too_many_requests:
      return "Too Many Requests";
    case status::request_header_fields_too_large:
      return "Request Header Fields Too Large";
    case status::internal_server_error:
      return "Internal Server Error";
    case status::not_implemented:
      return "Not Implemented";
    case status::bad_gateway:
      return "Bad Gateway";
    case status::service_unavailable:
      return "Service Unavailable";
    case status::gateway_timeout:
      return "Gateway Timeout";
    case status::http_version_not_supported:
      return "HTTP Version Not Supported";
  }
  switch (code_of(code) / 100) {
    case 1:
      return "Informational";
    case 2:
      return "Success";
    case 3:
      return "Redirection";
    case 4:
      return "Client Error";
    case 5:
      return "Server Error";
    default:
      return "Unknown";
  }
}

}  // namespace weft::http
