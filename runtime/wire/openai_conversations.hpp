// OpenAI's Conversations API under /v1/conversations: create (with up to 20 items and metadata),
// retrieve, update the metadata, delete; list, add (up to 20 at a time), retrieve and delete a
// conversation's items. A response given `conversation` reads its items and adds to them
// (openai_responses.hpp). Items are the Responses API's input items; each gets an id.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/wire/conversation_store.hpp"

namespace troupe::wire::openai {

struct conversations_call {
  std::string_view method;  // GET, POST or DELETE
  std::string_view rest;    // the path after "/v1/conversations": "", "/{id}", "/{id}/items", "/{id}/items/{item}"
  std::string_view body;
  std::optional<std::string> order, limit, after;  // the item list's query
  int64_t now = 0;          // created_at of a new conversation (Unix seconds)
  std::string new_id;       // a new conversation's id ("conv_" and 32 hex digits)
};

struct conversations_answer {
  int status = 200;
  std::string body;  // JSON: the answer, or an error naming what was wrong
};

conversations_answer serve_conversations(conversation_store& store, const conversations_call& call);

}  // namespace troupe::wire::openai
