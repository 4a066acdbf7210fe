'use strict';
// Sends N messages with the stock ali-ons producer (SEND_MESSAGE_V2), each with a key and
// a tag, and prints one line: `PRODUCED count=<n> errors=<n> seconds=<s>`.
// Message i: key `<prefix><i, 6 digits>`, tag TAGS[i % 3], body `key|tag|`.
// ONS_ACCESS_KEY / ONS_SECRET_KEY in the environment: sign requests (ACL).
// Usage: node alions_produce.js <nameSrv host:port> <topic> <n> <prefix> [window] [results]
// `window` sends run concurrently (default 8); every send is awaited before exit.
// `results` (a file) gets `key queueId queueOffset` per send, from its SendResult.
const fs = require('fs');
const { Producer, Message } = require('ali-ons');

const TAGS = ['TagA', 'TagB', 'TagC'];
const [nameSrv, topic, nText, prefix, windowText, resultsPath] = process.argv.slice(2);
const n = Number(nText);
const window = Number(windowText || 8);

async function main() {
  const producer = new Producer({
    httpclient: {}, // only used to look name servers up over HTTP; nameSrv is given
    nameSrv,
    producerGroup: `PID_alions_${topic}`,
    clientIP: '127.0.0.1', // ali-ons reads the machine's interfaces otherwise

    // ACL: ali-ons signs every request when both are set (lib/channel.js).
    accessKey: process.env.ONS_ACCESS_KEY || undefined,
    secretKey: process.env.ONS_SECRET_KEY || undefined,
  });
  producer.on('error', err => console.error('producer error', err));
  await producer.ready();
  const started = Date.now();
  let next = 0;
  let errors = 0;
  const results = [];
  async function worker() {
    while (next < n) {
      const i = next++;
      const key = `${prefix}${String(i).padStart(6, '0')}`;
      const tag = TAGS[i % 3];
      const msg = new Message(topic, tag, `${key}|${tag}|`);
      msg.keys = [key];
      try {
        const result = await producer.send(msg);
        if (result.sendStatus !== 'SEND_OK') throw new Error(result.sendStatus);
        results.push(`${key} ${result.messageQueue.queueId} ${result.queueOffset}\n`);
      } catch (err) {
        errors++;
        console.error(`SEND_ERROR key=${key}`, err);
      }
    }
  }
  await Promise.all(Array.from({ length: window }, worker));
  const seconds = (Date.now() - started) / 1000;
  if (resultsPath) fs.writeFileSync(resultsPath, results.join(''));
  console.log(`PRODUCED count=${n} errors=${errors} seconds=${seconds.toFixed(3)}`);
  try {
    await producer.close();
  } catch (err) {
    // e.g. UNREGISTER_CLIENT refused by an ACL broker: the sends were judged already.
    console.error('close error', err);
  }
}

main().then(
  () => process.exit(0),
  err => {
    console.error(err);
    process.exit(1);
  }
);
