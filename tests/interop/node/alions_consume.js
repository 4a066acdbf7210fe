'use strict';
// Consumes with the stock ali-ons push consumer (clustering, a tag expression) and writes
// one line `key tag queueId queueOffset reconsumeTimes topic` per delivery to <out>. Once
// <expected> distinct keys and <deliveries> deliveries (default: <expected>) have arrived
// it lingers <lingerMs> (so late duplicates or foreign messages are still recorded),
// closes the consumer (committing offsets) and prints
// `CONSUMED count=<n> distinct=<n> seconds=<s> errors=<n>` (errors: the consumer's
// 'error' events, e.g. a failed send-back); after <timeoutMs> it does the same with
// whatever it has. Exits 0 either way: the caller judges the file.
// With <failEvery> K > 0, the first delivery (reconsumeTimes 0) of every message whose
// key number is a multiple of K answers Consumer.ACTION_RETRY: ali-ons sends it back
// (CONSUMER_SEND_MSG_BACK) and the broker redelivers it later through %RETRY%<group>.
// ONS_ACCESS_KEY / ONS_SECRET_KEY in the environment: sign requests (ACL).
// Usage: node alions_consume.js <nameSrv> <topic> <group> <expression> <expected>
//        <timeoutMs> <out> [lingerMs] [failEvery] [deliveries]
const fs = require('fs');
const { Consumer } = require('ali-ons');

const [nameSrv, topic, group, expression, expectedText, timeoutText, out, lingerText,
  failEveryText, deliveriesText] = process.argv.slice(2);
const expected = Number(expectedText);
const lingerMs = Number(lingerText || 1000);
const failEvery = Number(failEveryText || 0);
const deliveries = Number(deliveriesText || expected);

function delay(ms) {
  return new Promise(resolve => setTimeout(resolve, ms));
}

async function main() {
  const consumer = new Consumer({
    httpclient: {},
    nameSrv,
    consumerGroup: group,
    clientIP: '127.0.0.1', // otherwise `undefined@<pid>` on a loopback-only host
    parallelConsumeLimit: 16,
    // ACL: ali-ons signs every request when both are set (lib/channel.js).
    accessKey: process.env.ONS_ACCESS_KEY || undefined,
    secretKey: process.env.ONS_SECRET_KEY || undefined,
  });
  const errors = [];
  consumer.on('error', err => errors.push(err));
  const lines = [];
  const keys = new Set();
  let resolveDone;
  const done = new Promise(resolve => (resolveDone = resolve));
  const started = Date.now();
  consumer.subscribe(topic, expression, async msg => {
    lines.push(
      `${msg.keys} ${msg.tags} ${msg.queueId} ${msg.queueOffset} ${msg.reconsumeTimes} ` +
        `${msg.topic}\n`
    );
    keys.add(msg.keys);
    if (keys.size >= expected && lines.length >= deliveries) resolveDone(true);
    const number = Number(String(msg.keys).replace(/^\D+/, ''));
    if (failEvery > 0 && msg.reconsumeTimes === 0 && number % failEvery === 0) {
      return Consumer.ACTION_RETRY;
    }
  });
  await consumer.ready();
  console.log('PUSH_STARTED');
  const complete = await Promise.race([done, delay(Number(timeoutText)).then(() => false)]);
  if (complete) await delay(lingerMs);
  const count = lines.length;
  fs.writeFileSync(out, lines.join(''));
  await consumer.close();
  for (const err of errors) console.error('consumer error', err.name, err.message);
  const seconds = (Date.now() - started) / 1000;
  console.log(
    `CONSUMED count=${count} distinct=${keys.size} seconds=${seconds.toFixed(3)} ` +
      `errors=${errors.length}`
  );
}

main().then(
  () => process.exit(0),
  err => {
    console.error(err);
    process.exit(1);
  }
);
