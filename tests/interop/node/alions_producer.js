'use strict';
// Sends one message with the stock ali-ons producer and prints one machine-readable
// line: `SEND_RESULT status=<SEND_OK...> msg_id=<id> queue=<queueId> offset=<queueOffset>`.
// Usage: node alions_producer.js <nameSrv host:port> <topic> <body>
// The route comes from the name server; the send goes to the broker address in it.
const { Producer, Message } = require('ali-ons');

const [nameSrv, topic, body] = process.argv.slice(2);

async function main() {
  const producer = new Producer({
    httpclient: {}, // only used to look name servers up over HTTP; nameSrv is given
    nameSrv,
    producerGroup: 'PID_alions_interop',
    clientIP: '127.0.0.1', // ali-ons reads the machine's interfaces otherwise
  });
  producer.on('error', err => console.error('producer error', err));
  await producer.ready();
  const result = await producer.send(new Message(topic, 'TagA', body));
  console.log(
    `SEND_RESULT status=${result.sendStatus} msg_id=${result.msgId} ` +
      `queue=${result.messageQueue.queueId} offset=${result.queueOffset}`
  );
  await producer.close();
}

main().then(
  () => process.exit(0),
  err => {
    console.error(err);
    process.exit(1);
  }
);
