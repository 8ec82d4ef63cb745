// An MCP client from another implementation: the MCP TypeScript SDK (1.32, protocol
// 2025-11-25) on a session runs a write as a task with its task driver (`callToolStream`:
// `params.task` because `tools/list` says `execution.taskSupport`, then `tasks/get` until
// the task has ended, then `tasks/result`), follows its progress, lists tasks, and cancels a
// second, slow task. The SDK checks every answer against its schema.
//
//     node tests/clients/tasks.mjs NPM_PREFIX MCP_URL BEARER
//
// NPM_PREFIX holds node_modules/@modelcontextprotocol/sdk (`.ci/run` installs it in
// target/npm). Prints one JSON line with what it saw.

const [npm, url, bearer] = process.argv.slice(2);
const sdk = `${npm}/node_modules/@modelcontextprotocol/sdk/dist/esm`;
const { Client } = await import(`${sdk}/client/index.js`);
const { StreamableHTTPClientTransport } = await import(`${sdk}/client/streamableHttp.js`);

const seen = { progress: [], messages: [], statuses: [] };
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${bearer}` } },
});
const client = new Client(
  { name: 'tasks-ts', version: '0.1.0' },
  { capabilities: { tasks: { list: {}, cancel: {} } } },
);
await client.connect(transport);
seen.protocol = transport.protocolVersion;
seen.tasks_capability = client.getServerCapabilities().tasks ?? null;
const tools = await client.listTools();
seen.task_support = Object.fromEntries(
  tools.tools
    .filter((t) => ['hub.run_allowed_tests', 'hub.get_status'].includes(t.name))
    .map((t) => [t.name, t.execution?.taskSupport ?? null]),
);

/** The preview's token, then the execute's arguments. */
async function execute(name, key) {
  const preview = await client.callTool({ name: 'hub.run_allowed_tests', arguments: { name } });
  const token = preview.structuredContent.confirmation_token;
  return {
    name: 'hub.run_allowed_tests',
    arguments: { name, phase: 'execute', confirmation_token: token, idempotency_key: key },
  };
}

const stream = client.experimental.tasks.callToolStream(await execute('suite', 'ts-k1'), undefined, {
  onprogress: (p) => seen.progress.push([p.progress, p.total ?? null, p.message ?? null]),
});
for await (const message of stream) {
  seen.messages.push(message.type);
  if (message.type === 'taskCreated') seen.task_id = message.task.taskId;
  if (message.type === 'taskStatus' && message.task.statusMessage) {
    if (!seen.statuses.includes(message.task.statusMessage)) seen.statuses.push(message.task.statusMessage);
  }
  if (message.type === 'result') {
    seen.result = message.result.structuredContent;
    seen.result_meta = message.result._meta ?? null;
  }
  if (message.type === 'error') seen.error = String(message.error);
}
seen.listed = (await client.experimental.tasks.listTasks()).tasks.map((t) => t.taskId);

// A tool whose taskSupport is not given: asking for a task is refused (-32601).
const forbidden = client.experimental.tasks.callToolStream(
  { name: 'hub.get_status', arguments: {} },
  undefined,
  { task: {} },
);
for await (const message of forbidden) {
  if (message.type === 'error') seen.forbidden = message.error.code;
}

// A slow task, cancelled while it runs; a second cancel is refused (it has ended).
const slow = client.experimental.tasks.callToolStream(await execute('slow', 'ts-k2'));
let slowId;
for await (const message of slow) {
  if (message.type === 'taskCreated') {
    slowId = message.task.taskId;
    break;
  }
}
seen.cancelled_status = (await client.experimental.tasks.cancelTask(slowId)).status;
const code = async (f) => {
  try {
    await f();
    return null;
  } catch (e) {
    return e.code ?? String(e);
  }
};
seen.second_cancel = await code(() => client.experimental.tasks.cancelTask(slowId));
seen.unknown = await code(() => client.experimental.tasks.getTask('no-such-task'));
seen.bad_cursor = await code(() => client.experimental.tasks.listTasks('not-a-cursor'));
seen.cancelled_result = await code(() => client.experimental.tasks.getTaskResult(slowId));
await client.close();
console.log(JSON.stringify(seen));
