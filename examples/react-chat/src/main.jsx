// A chat on the AI SDK's useChat against llm_conversations' chat endpoints.
//
// The page keeps its conversation in the URL (?conversation=<id>), so a reload
// reopens it: the history endpoint gives useChat its messages, and
// `resume: true` reattaches to a run that is still executing. Stop cancels the
// run through the stop endpoint: the stream ends with the text kept as the answer.
import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses } from 'ai';
import { useEffect, useState } from 'react';
import { createRoot } from 'react-dom/client';

const root = document.getElementById('root');
const API = root.dataset.api; // e.g. "/api/"

function csrfToken() {
  const match = document.cookie.match(/(?:^|; )csrftoken=([^;]*)/);
  return match ? decodeURIComponent(match[1]) : '';
}

const headers = () => ({ 'X-CSRFToken': csrfToken() });

async function openConversation() {
  const url = new URL(window.location.href);
  let id = url.searchParams.get('conversation');
  if (!id) {
    const response = await fetch(`${API}conversations/`, {
      method: 'POST',
      headers: { ...headers(), 'Content-Type': 'application/json' },
      body: '{}',
    });
    id = (await response.json()).id;
    url.searchParams.set('conversation', id);
    window.history.replaceState(null, '', url);
  }
  const history = await fetch(`${API}conversations/${id}/chat/messages/`, { headers: headers() });
  return { id, messages: await history.json() };
}

// Text parts of an attempt a later one answered again are not the answer.
const superseded = (part) => part.providerMetadata?.llm_conversations?.superseded === true;

function ToolPart({ part, onDecide }) {
  const name = part.type.slice('tool-'.length);
  return (
    <div className="tool" data-call-id={part.toolCallId} data-state={part.state}>
      <span className="name">{name}</span> <code className="input">{JSON.stringify(part.input)}</code>
      {part.state === 'approval-requested' && (
        <span className="decide">
          <button className="approve" onClick={() => onDecide(part.approval.id, true)}>Approve</button>
          <button className="deny" onClick={() => onDecide(part.approval.id, false)}>Deny</button>
        </span>
      )}
      {part.state === 'output-available' && <div className="output">{String(part.output)}</div>}
      {part.state === 'output-error' && <div className="output error">{part.errorText}</div>}
      {part.state === 'output-denied' && <div className="output denied">denied</div>}
    </div>
  );
}

function Chat({ id, initialMessages }) {
  const [input, setInput] = useState('');
  const chat = useChat({
    id,
    messages: initialMessages,
    resume: true,
    transport: new DefaultChatTransport({ api: `${API}conversations/${id}/chat/`, headers }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  const busy = chat.status === 'submitted' || chat.status === 'streaming';

  // A stopped run's stream ends by itself (`abort`) after the last text it kept,
  // so the page shows what is stored; only without a run to stop does the page
  // stop reading itself.
  const stop = async () => {
    const last = chat.messages.at(-1);
    const response = await fetch(`${API}conversations/${id}/chat/${id}/stop`, {
      method: 'POST',
      headers: { ...headers(), 'Content-Type': 'application/json' },
      body: JSON.stringify({ activeStreamId: last?.role === 'assistant' ? last.id : null }),
    }).catch(() => null);
    if (response?.status !== 200) await chat.stop();
  };

  return (
    <main>
      <ol id="messages">
        {chat.messages.map((message) => (
          <li key={message.id} className={`msg ${message.role}`} data-id={message.id}>
            {message.parts.map((part, index) => {
              if (part.type === 'text' && !superseded(part)) {
                return <p key={index} className="text">{part.text}</p>;
              }
              if (part.type.startsWith('tool-')) {
                return (
                  <ToolPart
                    key={part.toolCallId}
                    part={part}
                    onDecide={(approvalId, approved) =>
                      chat.addToolApprovalResponse({ id: approvalId, approved })
                    }
                  />
                );
              }
              return null;
            })}
          </li>
        ))}
      </ol>
      <form
        onSubmit={(event) => {
          event.preventDefault();
          if (input.trim()) {
            chat.sendMessage({ text: input });
            setInput('');
          }
        }}
      >
        <textarea id="input" value={input} onChange={(event) => setInput(event.target.value)} />
        <button id="send" type="submit" disabled={busy}>Send</button>
        {busy && <button id="stop" type="button" onClick={stop}>Stop</button>}
      </form>
      <div id="status" data-status={chat.status}>{chat.error ? chat.error.message : chat.status}</div>
    </main>
  );
}

function App() {
  const [opened, setOpened] = useState(null);
  useEffect(() => {
    openConversation().then(setOpened);
  }, []);
  if (!opened) return <p id="loading">Loading…</p>;
  return <Chat id={opened.id} initialMessages={opened.messages} />;
}

createRoot(root).render(<App />);
