#pragma once
// The chat page served at GET /: one self-contained HTML document (no build step, no
// external assets) that streams replies from /v1/chat/completions.
namespace epq::server {

const char* chat_page_html();

}  // namespace epq::server
