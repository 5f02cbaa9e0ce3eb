// Drives a live server with the AI SDK itself and prints what it reconstructed, as JSON.
//
// Usage: node ui_message.mjs '<spec as JSON>'
//
// spec.mode "chat": a chat (the class useChat wraps) with the default HTTP transport
//   posts spec.text to spec.api; with spec.decide ("approve" or "deny") every call
//   waiting for approval is decided and the chat sends again, as an app does after
//   addToolApprovalResponse.
// spec.mode "events": GET spec.url (a run's events with ?format=ai-sdk) and read the
//   stream into a UI message (continuing spec.message when given; an error chunk
//   ends the reading unless spec.terminateOnError is false).
// spec.mode "resume": a reload: GET spec.history (the chat's UIMessage[]), validated
//   by the SDK, opens a chat with it, which resumes the stream as useChat's
//   `resume: true` does (the transport's reconnect request).
// In every mode spec.history, when given, is read last and validated: the
// output's "history" is what the SDK validated ("historyError" if it did not).
// spec.headers (default: Authorization: spec.authorization) go with every request;
// spec.body is the transport's body option (fields added to what it posts).
// spec.progress: each new text of the chat's last assistant message is printed, as
// {"progress": text} on a line of its own, as the chat gets it (the output is the
// last line), so a test can act while the reply streams.
//
// Every response body is also parsed on its own with the SDK's parseJsonEventStream
// and uiMessageChunkSchema: each chunk that does not parse is counted.
import {
  AbstractChat,
  DefaultChatTransport,
  parseJsonEventStream,
  readUIMessageStream,
  uiMessageChunkSchema,
  validateUIMessages,
} from 'ai';

const spec = JSON.parse(process.argv[2]);
const headers = spec.headers ?? { Authorization: spec.authorization };
const responses = [];
const errors = [];

let shown = null;
function progress(message) {
  if (!spec.progress || message.role !== 'assistant') return;
  const text = message.parts
    .filter((part) => part.type === 'text')
    .map((part) => part.text)
    .join('');
  if (text && text !== shown) {
    shown = text;
    console.log(JSON.stringify({ progress: text }));
  }
}

// The state a UI framework keeps for a chat (what @ai-sdk/react's does, without React).
class State {
  constructor(messages = []) {
    this.messages = messages;
    this.status = 'ready';
    this.error = undefined;
  }
  pushMessage = (message) => {
    this.messages = this.messages.concat(message);
    progress(message);
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (index, message) => {
    this.messages = [
      ...this.messages.slice(0, index),
      this.snapshot(message),
      ...this.messages.slice(index + 1),
    ];
    progress(message);
  };
  snapshot = (value) => structuredClone(value);
}

class Chat extends AbstractChat {
  constructor(options) {
    super({ ...options, state: new State(options.messages) });
  }
}

async function parseAll(text) {
  const chunks = [];
  let parseErrors = 0;
  const stream = parseJsonEventStream({
    stream: new Response(text).body,
    schema: uiMessageChunkSchema,
  });
  for await (const result of stream) {
    if (result.success) chunks.push(result.value);
    else parseErrors += 1;
  }
  return { chunks, parseErrors };
}

// Keeps each response's status, protocol header and body text beside what the SDK reads.
async function recordingFetch(url, init) {
  const response = await fetch(url, init);
  const record = {
    status: response.status,
    protocol: response.headers.get('x-vercel-ai-ui-message-stream'),
    contentType: response.headers.get('content-type'),
    text: response.clone().text(),
  };
  responses.push(record);
  return response;
}

async function describeResponses() {
  const described = [];
  for (const record of responses) {
    const text = await record.text;
    const { chunks, parseErrors } = await parseAll(text);
    described.push({
      status: record.status,
      protocol: record.protocol,
      contentType: record.contentType,
      chunks,
      parseErrors,
      done: text.endsWith('data: [DONE]\n\n'),
    });
  }
  return described;
}

async function chat() {
  const instance = new Chat({
    id: spec.chatId,
    transport: new DefaultChatTransport({
      api: spec.api,
      headers,
      body: spec.body,
      fetch: recordingFetch,
    }),
    onError: (error) => errors.push(String(error.message ?? error)),
  });
  await instance.sendMessage({ text: spec.text });
  if (spec.decide) {
    const last = instance.messages.at(-1);
    for (const part of last.parts) {
      if (part.state === 'approval-requested') {
        await instance.addToolApprovalResponse({
          id: part.approval.id,
          approved: spec.decide === 'approve',
        });
      }
    }
    await instance.sendMessage();
  }
  return { messages: instance.messages, status: instance.status };
}

async function events() {
  const response = await recordingFetch(spec.url, { headers });
  const chunks = parseJsonEventStream({
    stream: response.body,
    schema: uiMessageChunkSchema,
  }).pipeThrough(
    new TransformStream({
      transform(result, controller) {
        if (!result.success) throw result.error;
        controller.enqueue(result.value);
      },
    }),
  );
  let message;
  for await (const snapshot of readUIMessageStream({
    message: spec.message,
    stream: chunks,
    onError: (error) => errors.push(String(error.message ?? error)),
    terminateOnError: spec.terminateOnError ?? true,
  })) {
    message = snapshot;
  }
  return { messages: [message], status: 'ready' };
}

async function history() {
  const response = await fetch(spec.history, { headers });
  return validateUIMessages({ messages: await response.json() });
}

async function resume() {
  const instance = new Chat({
    id: spec.chatId,
    messages: await history(),
    transport: new DefaultChatTransport({ api: spec.api, headers, fetch: recordingFetch }),
    onError: (error) => errors.push(String(error.message ?? error)),
  });
  await instance.resumeStream();
  return { messages: instance.messages, status: instance.status };
}

const modes = { chat, events, resume };
const result = await modes[spec.mode]();
const extra = {};
if (spec.history) {
  try {
    extra.history = await history();
  } catch (error) {
    extra.historyError = String(error.message ?? error);
  }
}
console.log(
  JSON.stringify({ ...result, ...extra, errors, responses: await describeResponses() }),
);
