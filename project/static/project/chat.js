// The demo chat page: lists and creates conversations, sends a message as a
// streamed run (Server-Sent Events over fetch, since EventSource cannot POST),
// and shows text, tool calls and their results as they arrive. The settings
// panel sets the run parameters of each run (provider, model, instructions,
// temperature, and a structured output example) from GET /api/providers/.
// An image or a PDF can be attached: it is uploaded to POST /api/attachments/
// and the user turn shows it by id, as a content part.
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

function renderMessage(message, replacing = null) {
  if (message.role === "tool" && attachResult(message)) return;
  const bubble = element("div", `msg ${message.role}` + (message.is_error ? " error" : ""));
  bubble.dataset.messageId = message.id;
  bubble.append(element("span", "role", message.role + (message.model ? ` · ${message.model}` : "")));
  appendContent(bubble, message.content);
  if (message.parsed != null) bubble.append(element("code", "parsed", "parsed: " + JSON.stringify(message.parsed)));
  for (const call of message.tool_calls || []) bubble.append(callCard(call));
  if (replacing) replacing.replaceWith(bubble);
  else $("transcript").append(bubble);
  bubble.scrollIntoView({ block: "end" });
}

async function loadConversations() {
  const body = await (await api("/conversations/?ordering=-updated_at")).json();
  const list = $("conversations");
  list.replaceChildren();
  for (const conversation of body.results) {
    const item = element("li", conversation.id === conversationId ? "active" : "", conversation.title || UNTITLED);
    // An automatic title arrives after the first run: show it on the open one too.
    if (conversation.id === conversationId) $("title").textContent = conversation.title || UNTITLED;
    item.dataset.id = conversation.id;
    item.addEventListener("click", () => openConversation(conversation.id, conversation.title));
    list.append(item);
  }
}

async function openConversation(id, title) {
  conversationId = id;
  cards.clear();
  $("title").textContent = title || UNTITLED;
  $("transcript").replaceChildren();
  showAction(null);
  const body = await (await api(`/conversations/${id}/messages/?limit=100&order=asc`)).json();
  for (const message of body.data) renderMessage(message);
  const activeRun = (await (await api(`/conversations/${id}/`)).json()).active_run;
  if (activeRun) {
    const run = await (await api(`/conversations/${id}/runs/${activeRun}/`)).json();
    if (run.status === "requires_action") showAction(run);
  }
  setStatus("");
  await loadConversations();
}

function showAction(run) {
  waitingRun = run;
  $("action").hidden = !run;
  $("pending").replaceChildren();
  for (const call of run ? run.pending_tool_calls : []) {
    $("pending").append(element("li", "", `${call.function.name} ${call.function.arguments}`));
  }
}

// Reads an SSE body and calls onEvent(name, data) for each message.
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
      const data = [];
      for (const line of frame.split("\n")) {
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).trim());
      }
      if (data.length) onEvent(name, JSON.parse(data.join("\n")));
    }
  }
}

async function streamRun(path, body) {
  let live = null; // the assistant bubble being streamed
  const response = await api(path, { method: "POST", body: JSON.stringify({ ...body, stream: true }) });
  await readEvents(response, (name, data) => {
    switch (name) {
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
        setStatus(`Run ${data.run.status}: ${data.run.error ? data.run.error.message : ""}`, true);
        break;
    }
  });
  await loadConversations();
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
    await streamRun(`/conversations/${conversationId}/runs/`, { message, ...runOptions() });
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
loadConversations().catch((error) => setStatus(error.message, true));
