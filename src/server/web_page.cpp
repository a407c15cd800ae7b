#include "server/web_page.h"

namespace epq::server {

const char* chat_page_html() {
  return R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>epq chat</title>
<style>
  body { font-family: system-ui, sans-serif; margin: 0; display: flex; flex-direction: column; height: 100vh; background: #f6f6f4; }
  header { padding: 10px 16px; background: #22313f; color: #fff; font-size: 15px; }
  header span { opacity: 0.7; margin-left: 8px; }
  #log { flex: 1; overflow-y: auto; padding: 16px; }
  .msg { max-width: 760px; margin: 0 auto 12px; padding: 10px 14px; border-radius: 8px; white-space: pre-wrap; line-height: 1.4; }
  .user { background: #dbe9f6; }
  .assistant { background: #fff; border: 1px solid #ddd; }
  .reasoning { color: #777; font-style: italic; border-left: 3px solid #ccc; padding-left: 8px; margin-bottom: 6px; }
  .error { background: #fbe3e3; color: #8a1f1f; }
  form { display: flex; gap: 8px; padding: 12px 16px; background: #fff; border-top: 1px solid #ddd; }
  textarea { flex: 1; resize: none; height: 54px; font: inherit; padding: 8px; }
  button { padding: 0 18px; font: inherit; }
  #stats { font-size: 12px; color: #666; text-align: center; padding-bottom: 6px; }
</style>
</head>
<body>
<header>epq chat<span id="model"></span></header>
<div id="log"></div>
<div id="stats"></div>
<form id="form">
  <textarea id="input" placeholder="Type a message; Enter sends, Shift+Enter adds a line" autofocus></textarea>
  <button id="send" type="submit">Send</button>
</form>
<script>
const log = document.getElementById('log');
const input = document.getElementById('input');
const send = document.getElementById('send');
const stats = document.getElementById('stats');
const history = [];

// A server started with an API key answers 401: ask for the key, keep it for this tab, retry.
let apiKey = sessionStorage.getItem('epq-api-key') || '';
function withKey(options) {
  const headers = Object.assign({}, options.headers);
  if (apiKey) headers['Authorization'] = 'Bearer ' + apiKey;
  return Object.assign({}, options, {headers});
}
async function call(url, options = {}) {
  let response = await fetch(url, withKey(options));
  if (response.status === 401) {
    const key = window.prompt('This server needs an API key');
    if (key) {
      apiKey = key.trim();
      sessionStorage.setItem('epq-api-key', apiKey);
      response = await fetch(url, withKey(options));
    }
  }
  return response;
}

call('/v1/models').then(r => r.json()).then(j => {
  if (j.data && j.data[0]) document.getElementById('model').textContent = j.data[0].id;
}).catch(() => {});

function bubble(cls, text) {
  const div = document.createElement('div');
  div.className = 'msg ' + cls;
  div.textContent = text;
  log.appendChild(div);
  log.scrollTop = log.scrollHeight;
  return div;
}

async function ask(text) {
  history.push({role: 'user', content: text});
  bubble('user', text);
  const reply = bubble('assistant', '');
  reply.dataset.state = 'streaming';
  let reasoningDiv = null, content = '', reasoning = '', tokens = 0;
  const started = performance.now();
  try {
    const response = await call('/v1/chat/completions', {
      method: 'POST',
      headers: {'Content-Type': 'application/json'},
      body: JSON.stringify({messages: history, stream: true, max_tokens: 512}),
    });
    if (!response.ok) {
      const err = await response.json().catch(() => ({error: {message: response.statusText}}));
      throw new Error(err.error ? err.error.message : response.statusText);
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, {stream: true});
      let split;
      while ((split = buffer.indexOf('\n\n')) >= 0) {
        const event = buffer.slice(0, split);
        buffer = buffer.slice(split + 2);
        if (!event.startsWith('data: ')) continue;
        const data = event.slice(6);
        if (data === '[DONE]') continue;
        const chunk = JSON.parse(data);
        const delta = chunk.choices && chunk.choices[0] ? chunk.choices[0].delta : null;
        if (!delta) continue;
        if (delta.reasoning_content) {
          if (!reasoningDiv) { reasoningDiv = document.createElement('div'); reasoningDiv.className = 'reasoning'; reply.before(reasoningDiv); }
          reasoning += delta.reasoning_content;
          reasoningDiv.textContent = reasoning;
        }
        if (delta.content) { content += delta.content; reply.textContent = content; tokens++; }
        log.scrollTop = log.scrollHeight;
      }
    }
    history.push({role: 'assistant', content});
    const seconds = (performance.now() - started) / 1000;
    stats.textContent = tokens + ' chunks in ' + seconds.toFixed(1) + ' s';
  } catch (e) {
    reply.className = 'msg error';
    reply.textContent = 'Error: ' + e.message;
    history.pop();
  }
  reply.dataset.state = 'done';
}

document.getElementById('form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const text = input.value.trim();
  if (!text) return;
  input.value = '';
  send.disabled = true;
  await ask(text);
  send.disabled = false;
  input.focus();
});
input.addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); document.getElementById('form').requestSubmit(); }
});
</script>
</body>
</html>
)HTML";
}

}  // namespace epq::server
