// Drives `epq serve` with the official `openai` npm client.
//   node openai_client.mjs BASE_URL MODEL
// Prints one JSON object: texts of streaming and non-streaming chat and completion
// requests made with the same seed, and the usage counts reported.
import OpenAI from 'openai';

const [baseURL, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0 });
const messages = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Tell me about the river and the old mill.' },
];
const params = { model, max_tokens: 40, temperature: 0.9, top_p: 0.95, seed: 1234 };

const chat = await client.chat.completions.create({ ...params, messages });
let chatStream = '';
let chunks = 0;
let streamUsage = null;
for await (const chunk of await client.chat.completions.create({ ...params, messages, stream: true, stream_options: { include_usage: true } })) {
  if (chunk.usage) streamUsage = chunk.usage;
  const delta = chunk.choices[0]?.delta?.content;
  if (delta) { chatStream += delta; chunks++; }
}
const completion = await client.completions.create({ ...params, prompt: 'The river ran past the old mill' });
let completionStream = '';
for await (const chunk of await client.completions.create({ ...params, prompt: 'The river ran past the old mill', stream: true })) {
  completionStream += chunk.choices[0]?.text ?? '';
}
let notFound = null;
try {
  await client.chat.completions.create({ ...params, model: 'no-such-model', messages });
} catch (e) {
  notFound = { status: e.status, type: e.error?.type, code: e.error?.code };
}
const models = await client.models.list();
console.log(JSON.stringify({
  chat: chat.choices[0].message.content,
  chat_finish: chat.choices[0].finish_reason,
  chat_usage: chat.usage,
  chat_stream: chatStream,
  chat_stream_chunks: chunks,
  stream_usage: streamUsage,
  completion: completion.choices[0].text,
  completion_stream: completionStream,
  not_found: notFound,
  models: models.data.map((m) => m.id),
}));
