// Drives the official RocketMQ 5 Node.js SDK (npm rocketmq-client-nodejs, pinned in
// package.json) for aiorocketmq's gRPC interop tests. One JSON document on stdout, last
// line; exit 1 with the error on stderr.
//
//   node driver.js produce <endpoint> <topic> <count>
//   node driver.js simple  <endpoint> <topic> <group> <expect> <timeoutMs>
'use strict';

const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');

function view(m) {
  return {
    id: m.messageId,
    body: m.body.toString(),
    topic: m.topic,
    tag: m.tag ?? null,
    keys: m.keys,
    attempt: m.deliveryAttempt ?? null,
    properties: Object.fromEntries(m.properties ?? new Map()),
  };
}

async function produce(endpoints, topic, count) {
  const producer = new Producer({ endpoints, topics: [topic] });
  await producer.startup();
  const sent = [];
  try {
    for (let i = 0; i < count; i++) {
      const receipt = await producer.send({
        topic,
        tag: 'TagNode',
        keys: [`node-key-${i}`],
        properties: new Map([['index', String(i)]]),
        body: Buffer.from(`node-${i}`),
      });
      sent.push({ id: receipt.messageId });
    }
  } finally {
    await producer.shutdown();
  }
  return { sent };
}

async function simple(endpoints, topic, group, expect, timeoutMs) {
  const consumer = new SimpleConsumer({
    consumerGroup: group,
    endpoints,
    subscriptions: new Map([[topic, '*']]),
    awaitDuration: 5000,
  });
  await consumer.startup();
  const received = [];
  const deadline = Date.now() + timeoutMs;
  try {
    while (received.length < expect && Date.now() < deadline) {
      for (const message of await consumer.receive(16, 30000)) {
        received.push(view(message));
        await consumer.ack(message);
      }
    }
  } finally {
    await consumer.shutdown();
  }
  return { received };
}

async function main() {
  const [command, endpoints, topic, ...rest] = process.argv.slice(2);
  let result;
  if (command === 'produce') {
    result = await produce(endpoints, topic, Number(rest[0]));
  } else if (command === 'simple') {
    result = await simple(endpoints, topic, rest[0], Number(rest[1]), Number(rest[2]));
  } else {
    throw new Error(`unknown command ${command}`);
  }
  process.stdout.write(JSON.stringify(result) + '\n');
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(String(err && err.stack ? err.stack : err) + '\n');
    process.exit(1);
  },
);
