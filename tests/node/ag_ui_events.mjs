// Reads a live server's AG-UI stream with the AG-UI project's own packages and prints,
// as JSON, what they made of it.
//
// Usage: node ag_ui_events.mjs '<spec as JSON>'
//
// spec.url: a run's events (?format=ag-ui); spec.lastEventId, when given, is sent as
// Last-Event-ID. spec.threadId: the conversation's id (the agent's thread).
// spec.headers (default: Authorization: spec.authorization) go with every request.
//
// The body is read three ways:
// - each SSE message's data is parsed with @ag-ui/core's EventSchemas (@ag-ui/core/schemas) (the zod schema
//   of every event): "invalid" lists the events that do not parse;
// - the parsed events go through @ag-ui/client's verifyEvents (the order the protocol
//   requires: RUN_STARTED first, a message started before its content, nothing after
//   RUN_FINISHED or RUN_ERROR...): "verifyError" is its error, if any;
// - an HttpAgent (the client's HTTP transport, with a fetch that sends a GET to
//   spec.url) runs against the same stream and applies the events: "messages" and
//   "state" are the agent's afterwards, "agentError" its error, if any.
//
// spec.start {url, body} instead of spec.url: POST body to url (a conversation's
// runs/, starting the run) and follow the run's events live with the agent alone,
// as a frontend does; the events checked are those the agent received. With
// spec.progress each new text of the agent's assistant messages is printed as it
// arrives, as {"progress": text} on a line of its own (the output is the last line).
import { EventSchemas } from '@ag-ui/core/schemas';
import { HttpAgent, verifyEvents } from '@ag-ui/client';
import { from, lastValueFrom, toArray } from 'rxjs';

const spec = JSON.parse(process.argv[2]);
const headers = spec.headers ?? { Authorization: spec.authorization };
if (spec.lastEventId !== undefined) headers['Last-Event-ID'] = String(spec.lastEventId);

function messagesOf(text) {
  const messages = [];
  for (const block of text.split('\n\n')) {
    if (!block.trim() || block.startsWith(':')) continue;
    let id = null;
    const data = [];
    for (const line of block.split('\n')) {
      if (line.startsWith('id: ')) id = Number(line.slice(4));
      else if (line.startsWith('data: ')) data.push(line.slice(6));
    }
    messages.push({ id, data: data.join('\n') });
  }
  return messages;
}

let { url, runId } = spec;
if (spec.start) {
  const started = await fetch(spec.start.url, {
    method: 'POST',
    headers: { ...headers, 'Content-Type': 'application/json' },
    body: JSON.stringify(spec.start.body),
  });
  runId = (await started.json()).id;
  url = `${spec.start.url}${runId}/events/?format=ag-ui`;
}

const events = [];
const ids = [];
const invalid = [];
function check(data, id) {
  const parsed = EventSchemas.safeParse(data);
  if (parsed.success) {
    events.push(parsed.data);
    ids.push(id);
  } else {
    invalid.push({ data, issues: parsed.error.issues });
  }
}

let response = null;
if (!spec.start) {
  response = await fetch(url, { headers });
  for (const { id, data } of messagesOf(await response.text())) check(JSON.parse(data), id);
}

let agentError = null;
const agent = new HttpAgent({
  url,
  headers,
  threadId: spec.threadId,
  // The stream is a run's log: read it with a GET, as a reconnecting client does.
  fetch: async (address, init) => {
    const answer = await fetch(address, { headers: init.headers, signal: init.signal });
    response ??= answer;
    return answer;
  },
});
let shown = null;
const received = [];
const subscriber = {
  onEvent: ({ event }) => {
    received.push(event);
  },
  onMessagesChanged: ({ messages }) => {
    const text = messages
      .filter((message) => message.role === 'assistant')
      .map((message) => message.content ?? '')
      .join('');
    if (spec.progress && text && text !== shown) {
      shown = text;
      console.log(JSON.stringify({ progress: text }));
    }
  },
};
try {
  await agent.runAgent({ runId }, subscriber);
} catch (error) {
  agentError = String(error?.message ?? error);
}
if (spec.start) for (const event of received) check(event, null);

let verifyError = null;
try {
  await lastValueFrom(from(events).pipe(verifyEvents(false), toArray()));
} catch (error) {
  verifyError = String(error?.message ?? error);
}

console.log(
  JSON.stringify({
    status: response?.status,
    contentType: response?.headers.get('content-type'),
    events,
    ids,
    invalid,
    verifyError,
    agentError,
    messages: agent.messages,
    state: agent.state,
  }),
);
