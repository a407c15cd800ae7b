// Opens the web chat page in Debian's headless Chromium, sends a message and watches the
// reply stream in.   node web_page.mjs URL
// Prints JSON: the reply text and how many distinct lengths the page rendered for it. The
// lengths are taken from DOM mutation records, not by polling, so a fast machine that
// streams the whole reply between two polls still shows every step. The page samples at
// its default temperature, so a reply can end after a token or two: then the message is
// sent again (at most 5 times) until a reply of at least 16 characters shows the stream.
import { chromium } from 'playwright-core';

const [url] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
         '--disable-component-update', '--disable-sync'],
});
try {
  const page = await browser.newPage();
  await page.goto(url);
  await page.evaluate(() => {
    window.replyLengths = new Set();
    new MutationObserver((records) => {
      for (const record of records) {
        if (!record.target.classList || !record.target.classList.contains('assistant')) continue;
        for (const node of record.addedNodes) window.replyLengths.add(node.textContent.length);
      }
    }).observe(document.getElementById('log'), { childList: true, subtree: true });
  });
  let reply;
  for (let attempt = 0; attempt < 5; ++attempt) {
    await page.evaluate(() => window.replyLengths.clear());
    await page.fill('#input', 'Hello there, tell me a story.');
    await page.press('#input', 'Enter');
    reply = page.locator('.msg.assistant').nth(attempt);
    const deadline = Date.now() + 60000;
    for (;;) {
      if ((await reply.getAttribute('data-state')) === 'done') break;
      if (Date.now() > deadline) throw new Error('no complete reply within 60 s');
      await page.waitForTimeout(5);
    }
    if ((await reply.textContent()).length >= 16) break;
  }
  const errors = await page.locator('.msg.error').count();
  const lengths = await page.evaluate(() => window.replyLengths.size);
  console.log(JSON.stringify({ text: await reply.textContent(), lengths, errors,
                               user: await page.locator('.msg.user').last().textContent() }));
} finally {
  await browser.close();
}
