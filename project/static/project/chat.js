// The demo chat page: lists and creates conversations, sends a message as a
// streamed run (Server-Sent Events over fetch, since EventSource cannot POST),
// and shows text, tool calls and their results as they arrive. The settings
// panel sets the run parameters of each run (provider, model, instructions,
// temperature, and a structured output example) from GET /api/providers/.
// An image or a PDF can be attached: it is uploaded to POST /api/attachments/
// and the user turn shows it by id, as a content part.
// The open conversation is in the URL's hash, so a reload reopens it at its
// newest messages ("Load earlier" pages back) and reattaches to a run still
// executing by following its event log. Stop cancels the run; the text it had
// streamed is kept as its answer.
"use strict";

const API = "/api";
// Conversations are created untitled: a title sent would be the user's, and an
// automatic title (TITLE_PROVIDER) never replaces a user's. This is only shown.
const UNTITLED = "New conversation";
const EXAMPLES = {
  weather: {
    tool_calls: [
      { type: "function", function: { name: "get_weather", arguments: { city: "Paris" } } },
      { type: "function", function: { name: "get_time", arguments: {} } },
    ],
  },
  structured: { answer: "Paris", confidence: 0.9 },
  email: {
    tool_calls: [
      {
        type: "function",
        function: {
          name: "send_email",
          arguments: { to: "team@example.com", subject: "Hello", body: "Hi from the demo." },
        },
      },
    ],
  },
};

// The JSON Schema the "structured output" checkbox sends as response_format.
const ANSWER_SCHEMA = {
  type: "object",
  properties: { answer: { type: "string" }, confidence: { type: "number" } },
  required: ["answer"],
};

const $ = (id) => document.getElementById(id);
let providers = []; // GET /api/providers/: what this user may run with
let conversationId = null;
let waitingRun = null;
let executingRun = null; // the run this page streams or follows, for Stop
let streamed = []; // the runs this page streams, oldest first (a message sent while busy adds one)
let live = null; // the assistant bubble being streamed
let oldestId = null; // the oldest message shown, for "Load earlier"
let nextConversations = null; // the next page of the sidebar
const PAGE = 50;
const cards = new Map(); // tool_call_id -> card element

function csrfToken() {
  const match = document.cookie.match(/(?:^|; )csrftoken=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : "";
}

async function api(path, options = {}) {
  const response = await fetch(API + path, {
    ...options,
    headers: {
      "Content-Type": "application/json",
      "X-CSRFToken": csrfToken(),
      ...(options.headers || {}),
    },
  });
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    const error = body.error || {};
    throw new Error(`${error.code || response.status}: ${error.message || response.statusText}`);
  }
  return response;
}

function setStatus(text, isError = false) {
  $("status").textContent = text;
  $("status").classList.toggle("error", isError);
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function pretty(argumentsText) {
  try {
    return JSON.stringify(JSON.parse(argumentsText), null, 2);
  } catch {
    return argumentsText; // malformed arguments are shown as the model sent them
  }
}

function callCard(call) {
  const card = element("div", "card");
  card.dataset.toolCallId = call.id;
  const head = element("div");
  head.append(element("span", "name", call.function.name), element("span", "state", ""));
  card.append(head, element("pre", "", pretty(call.function.arguments)));
  cards.set(call.id, card);
  return card;
}

function attachResult(message) {
  const card = cards.get(message.tool_call_id);
  if (!card) return false;
  card.querySelector(".state").textContent = message.is_error ? "error" : "done";
  card.querySelector(".result")?.remove();
  const result = element("div", "result" + (message.is_error ? " error" : ""));
  const shown = element("pre", "");
  appendContent(shown, message.content);
  result.append(shown);
  card.append(result);
  return true;
}

// Content parts (images and files by attachment id) as text, thumbnails and links.
function appendContent(node, content) {
  if (!Array.isArray(content)) {
    if (content) node.append(document.createTextNode(content));
    return;
  }
  for (const part of content) {
    if (part.type === "text") node.append(document.createTextNode(part.text));
    const url = `${API}/attachments/${part.attachment_id}/content/`;
    if (part.type === "image") {
      const image = element("img", "thumb");
      image.src = url;
      image.alt = "attached image";
      node.append(image);
    } else if (part.type === "file") {
      const link = element("a", "file", "attached file");
      link.href = url;
      node.append(link);
    }
  }
}

async function upload(file) {
  const form = new FormData();
  form.append("file", file);
  const response = await fetch(`${API}/attachments/`, {
    method: "POST",
    body: form,
    headers: { "X-CSRFToken": csrfToken() },
  });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = body.error || {};
    throw new Error(`${error.code || response.status}: ${error.message || response.statusText}`);
  }
  return body;
}

function renderMessage(message, replacing = null, into = null) {
  const shown = document.querySelector(`[data-message-id="${message.id}"]`);
  if (shown) {
    replacing?.remove(); // a replayed turn this page already shows
    return;
  }
  if (message.role === "tool" && attachResult(message)) return;
  const bubble = element("div", `msg ${message.role}` + (message.is_error ? " error" : ""));
  bubble.dataset.messageId = message.id;
  const cancelled = message.finish_reason === "cancelled" ? " · stopped" : "";
  bubble.append(element("span", "role", message.role + (message.model ? ` · ${message.model}` : "") + cancelled));
  if (message.compacted_by) {
    // The provider compacted the turns so far here: its later calls read its
    // compacted state in place of the messages above (which stay stored).
    bubble.append(element("div", "compacted", `Compacted by ${message.compacted_by}: later calls read its summary of the messages above`));
  }
  if (message.reasoning) {
    // The model's reasoning (shown when SHOW_REASONING is on), folded.
    const reasoning = element("details", "reasoning");
    reasoning.append(element("summary", "", "Reasoning"));
    for (const part of message.reasoning) reasoning.append(element("p", part.kind, part.text));
    bubble.append(reasoning);
  }
  appendContent(bubble, message.content);
  if (message.parsed != null) bubble.append(element("code", "parsed", "parsed: " + JSON.stringify(message.parsed)));
  for (const call of message.tool_calls || []) bubble.append(callCard(call));
  if (replacing) replacing.replaceWith(bubble);
  else if (into) into.append(bubble);
  else $("transcript").append(bubble);
  if (!into) bubble.scrollIntoView({ block: "end" });
}

async function loadConversations(more = false) {
  const search = $("search").value.trim();
  const path = more ? nextConversations : `/conversations/?ordering=-updated_at${search ? `&search=${encodeURIComponent(search)}` : ""}`;
  const body = await (await api(path)).json();
  const list = $("conversations");
  if (!more) list.replaceChildren();
  for (const conversation of body.results) {
    const item = element("li", conversation.id === conversationId ? "active" : "", conversation.title || UNTITLED);
    // An automatic title arrives after the first run: show it on the open one too.
    if (conversation.id === conversationId) $("title").textContent = conversation.title || UNTITLED;
    item.dataset.id = conversation.id;
    item.addEventListener("click", () => openConversation(conversation.id, conversation.title));
    list.append(item);
  }
  // The API's next page, as a path under /api.
  nextConversations = body.next ? body.next.slice(body.next.indexOf(API + "/") + API.length) : null;
  $("more-conversations").hidden = !nextConversations;
}

// The newest PAGE messages first; older ones page by page, in order, on top.
async function showPage(after = null) {
  const query = `?order=desc&limit=${PAGE}` + (after ? `&after=${after}` : "");
  const body = await (await api(`/conversations/${conversationId}/messages/${query}`)).json();
  const page = document.createDocumentFragment();
  for (const message of body.data.slice().reverse()) renderMessage(message, null, page);
  $("load-earlier").after(page);
  if (body.last_id) oldestId = body.last_id;
  $("load-earlier").hidden = !body.has_more;
}

async function loadEarlier() {
  const transcript = $("transcript");
  const fromBottom = transcript.scrollHeight - transcript.scrollTop;
  await showPage(oldestId);
  transcript.scrollTop = transcript.scrollHeight - fromBottom; // the view stays where it was
}

async function openConversation(id, title) {
  conversationId = id;
  executingRun = null;
  streamed = [];
  cards.clear();
  live = null;
  oldestId = null;
  history.replaceState(null, "", `#c=${id}`);
  $("transcript").replaceChildren($("load-earlier"));
  showAction(null);
  const conversation = await (await api(`/conversations/${id}/`)).json();
  $("title").textContent = title || conversation.title || UNTITLED;
  await showPage();
  $("transcript").lastElementChild?.scrollIntoView({ block: "end" });
  setStatus("");
  if (conversation.active_run) {
    const run = await (await api(`/conversations/${id}/runs/${conversation.active_run}/`)).json();
    if (run.status === "requires_action") showAction(run);
    else followRun(run.id).catch((error) => setStatus(error.message, true));
  }
  await loadConversations();
}

function showAction(run) {
  waitingRun = run;
  $("action").hidden = !run;
  $("pending").replaceChildren();
  for (const call of run ? run.waiting_calls : []) {
    $("pending").append(element("li", "", `${call.function.name} ${call.function.arguments}`));
  }
}

// Reads an SSE body and calls onEvent(name, data, id) for each message.
async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let name = "message";
      let id = null;
      const data = [];
      for (const line of frame.split("\n")) {
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("id:")) id = Number(line.slice(3).trim());
        else if (line.startsWith("data:")) data.push(line.slice(5).trim());
      }
      if (data.length) onEvent(name, JSON.parse(data.join("\n")), id);
    }
  }
}

function onRunEvent(name, data) {
  switch (name) {
    case "run.running":
      // A lost attempt's text is answered again: drop what it had streamed.
      if (data.superseded_after !== undefined && live) {
        live.remove();
        live = null;
      }
      break;
    case "text.delta":
      if (!live) {
        live = element("div", "msg assistant");
        live.append(element("span", "role", "assistant"));
        $("transcript").append(live);
      }
      live.append(document.createTextNode(data.delta));
      break;
    case "message.stored":
      renderMessage(data.message, live);
      live = null;
      break;
    case "tool_call.started":
      cards.get(data.tool_call.id)?.querySelector(".state")?.replaceChildren("running…");
      break;
    case "tool_result.stored":
      renderMessage(data.message);
      break;
    case "run.requires_action":
      showAction(data.run);
      setStatus("Waiting for your approval.");
      break;
    case "run.completed":
      setStatus(`Run ${data.run.termination_reason}: ${data.run.iterations} model call(s), ${data.run.usage.total_tokens} tokens.`);
      break;
    case "run.failed":
    case "run.cancelled":
      setStatus(`Run ${data.run.status}${data.run.error ? ": " + data.run.error.message : ""}`, data.run.status === "failed");
      break;
  }
}

function executing(runId) {
  executingRun = runId;
  $("stop").hidden = !runId;
}

// `started` is called once the run is stored: a message sent while busy may follow.
async function streamRun(path, body, started = () => {}) {
  if (!streamed.length) live = null;
  const response = await api(path, { method: "POST", body: JSON.stringify({ ...body, stream: true }) });
  const runId = response.headers.get("X-Run-Id");
  streamed.push(runId);
  executing(streamed[0]);
  started();
  try {
    // A run waiting behind another (if_busy "enqueue") streams once its turn comes.
    await readEvents(response, onRunEvent);
  } finally {
    streamed = streamed.filter((id) => id !== runId);
    executing(streamed[0] || null);
  }
  await loadConversations();
}

// A run executing elsewhere (a reload, another tab): its log, from the start,
// past its pauses, until it ends or waits; turns shown already are skipped.
async function followRun(runId) {
  const conversation = conversationId;
  executing(runId);
  setStatus("Running…");
  let after = 0;
  try {
    for (;;) {
      const response = await api(`/conversations/${conversation}/runs/${runId}/events/?after=${after}`);
      await readEvents(response, (name, data, id) => {
        if (id) after = id;
        if (conversationId === conversation) onRunEvent(name, data);
      });
      const run = await (await api(`/conversations/${conversation}/runs/${runId}/`)).json();
      if (run.status !== "queued" && run.status !== "running") break;
    }
  } finally {
    if (conversationId === conversation) executing(null);
  }
}

async function stop() {
  if (!executingRun) return;
  setStatus("Stopping…");
  try {
    await api(`/conversations/${conversationId}/runs/${executingRun}/cancel/`, { method: "POST" });
  } catch (error) {
    setStatus(error.message, true);
  }
}

function selectedProvider() {
  return providers.find((provider) => provider.name === $("provider").value);
}

function showModels() {
  const provider = selectedProvider();
  $("model").replaceChildren(...(provider ? provider.models : []).map((name) => new Option(name, name)));
  if (provider) $("model").value = provider.models.includes(provider.model) ? provider.model : provider.models[0] || "";
  const parameters = provider ? provider.parameters : null;
  $("temperature").disabled = !parameters || !parameters.sampling.includes("temperature");
  if (parameters) $("temperature").max = parameters.max_temperature;
  $("structured").disabled = !parameters || !parameters.response_format;
  $("capabilities").textContent = provider
    ? `${provider.name} (${provider.backend}) takes: ${[...parameters.sampling, parameters.response_format ? "response_format" : ""].filter(Boolean).join(", ")}.`
    : "";
}

async function loadProviders() {
  providers = await (await api("/providers/")).json();
  $("provider").replaceChildren(...providers.map((provider) => new Option(provider.name, provider.name)));
  const fallback = providers.find((provider) => provider.default) || providers[0];
  if (fallback) $("provider").value = fallback.name;
  showModels();
}

// The run parameters the settings panel sets; unset ones are left out.
function runOptions() {
  const options = {};
  if ($("provider").value) options.provider = $("provider").value;
  if ($("model").value) options.model = $("model").value;
  const instructions = $("instructions").value.trim();
  if (instructions) options.instructions = instructions;
  const temperature = $("temperature").value;
  if (temperature !== "" && !$("temperature").disabled) options.temperature = Number(temperature);
  if ($("structured").checked && !$("structured").disabled) options.response_format = ANSWER_SCHEMA;
  if ($("if-busy").value) options.if_busy = $("if-busy").value;
  return options;
}

async function send(event) {
  event.preventDefault();
  const text = $("input").value.trim();
  const file = $("attach").files[0];
  if (!text && !file) return;
  $("send").disabled = true;
  try {
    if (!conversationId) await newConversation();
    let message = text;
    if (file) {
      setStatus("Uploading…");
      const attachment = await upload(file);
      const parts = text ? [{ type: "text", text }] : [];
      parts.push({ type: attachment.kind, attachment_id: attachment.id });
      message = { role: "user", content: parts };
      $("attach").value = "";
      $("attached").textContent = "";
    }
    $("input").value = "";
    setStatus("Thinking…");
    const own = { id: "pending", role: "user", content: typeof message === "string" ? message : message.content };
    renderMessage(own);
    // Send is back once the run is stored: while it streams, another message
    // is what the "While busy" choice says (a 409 with "reject").
    const started = () => { $("send").disabled = false; };
    await streamRun(`/conversations/${conversationId}/runs/`, { message, ...runOptions() }, started);
  } catch (error) {
    setStatus(error.message, true);
  } finally {
    $("send").disabled = false;
  }
}

async function decide(action) {
  if (!waitingRun) return;
  const run = waitingRun;
  showAction(null);
  setStatus(action === "approve" ? "Approved; running…" : "Denied.");
  try {
    await streamRun(`/conversations/${conversationId}/runs/${run.id}/${action}/`, {});
  } catch (error) {
    setStatus(error.message, true);
  }
}

async function newConversation() {
  const body = await (await api("/conversations/", { method: "POST", body: "{}" })).json();
  await openConversation(body.id, body.title);
}

$("composer").addEventListener("submit", send);
$("stop").addEventListener("click", stop);
$("load-earlier").addEventListener("click", () => loadEarlier().catch((e) => setStatus(e.message, true)));
$("more-conversations").addEventListener("click", () => loadConversations(true).catch((e) => setStatus(e.message, true)));
let searching = null;
$("search").addEventListener("input", () => {
  clearTimeout(searching);
  searching = setTimeout(() => loadConversations().catch((e) => setStatus(e.message, true)), 250);
});
$("new-conversation").addEventListener("click", () => newConversation().catch((e) => setStatus(e.message, true)));
$("approve").addEventListener("click", () => decide("approve"));
$("deny").addEventListener("click", () => decide("deny"));
$("provider").addEventListener("change", showModels);
$("attach").addEventListener("change", () => {
  const file = $("attach").files[0];
  $("attached").textContent = file ? file.name : "";
});
for (const button of document.querySelectorAll("button.example")) {
  button.addEventListener("click", () => {
    $("input").value = JSON.stringify(EXAMPLES[button.dataset.example]);
    if (button.dataset.example === "structured") $("structured").checked = true;
    $("input").focus();
  });
}
loadProviders().catch((error) => setStatus(error.message, true));
const reopened = location.hash.match(/^#c=([0-9a-f-]{36})$/);
if (reopened) openConversation(reopened[1]).catch((error) => setStatus(error.message, true));
else loadConversations().catch((error) => setStatus(error.message, true));
