/**
 * What the command says about itself — every option with what it does (one text for the parser
 * and for `--help`), the usage, the version — and when it was asked for help. Imports nothing:
 * `lite-agent --version` and `--help` are answered from here, without loading the agent.
 */

export const VERSION = "0.1.0"

/** What each option means: given to @effect/cli and printed by `--help`, one text for both. */
export const ABOUT = {
  print: ["-p, --print <prompt>", "Run one turn with this prompt (- reads it from stdin), print the answer and exit"],
  outputFormat: [
    "--output-format text|json|stream-json",
    "Print mode output: text (the answer), json (the result), stream-json (one JSON object per event per line)"
  ],
  workdir: ["--workdir <dir>", "The directory the tools work in (default: the current one)"],
  session: ["--session <id>", "Continue this session"],
  continue: ["--continue", "Continue the most recent session"],
  checkpointer: [
    "--checkpointer <store>",
    "Where sessions live: file:<dir>, sqlite:<file> or postgres:<url> (default: the file backend in ~/.lite-agent/sessions)"
  ],
  model: ["--model <model>", "anthropic (needs ANTHROPIC_API_KEY) or scripted:<turns.json> (offline)"],
  modelName: ["--model-name <name>", "The provider's model name"],
  maxSteps: ["--max-steps <n>", "Model calls per turn at most"],
  capture: [
    "--capture all|tools",
    "What a restore covers: all (the whole workdir, shell commands' changes included) or tools (the file tools' changes only)"
  ],
  permissionMode: [
    "--permission-mode <mode>",
    "default (ask before shell, writes and deletes), acceptEdits (ask before shell), bypassPermissions (ask nothing), plan (read-only tools only); -p without a terminal needs one"
  ],
  allowedTools: ["--allowed-tools <tools>", "Tools that run without asking, comma-separated (e.g. shell,write_file)"],
  disallowedTools: ["--disallowed-tools <tools>", "Tools that never run, comma-separated"],
  noColor: ["--no-color", "No colours (also when NO_COLOR is set or the output is not a terminal)"],
  host: ["--host <address>", "The address to listen on (default 127.0.0.1; others need --token)"],
  port: ["--port <n>", "The port (default 7321; 0 picks a free one)"],
  token: [
    "--token <token>",
    "The bearer token clients must send, at least 16 characters (default: LITE_AGENT_TOKEN, else a random one, printed)"
  ],
  serveModel: ["--model <model>", "Also serve an agent: anthropic or scripted:<turns.json> (default: sessions only)"]
} as const

const helpText = (usage: string, commands: ReadonlyArray<readonly [string, string]>, keys: ReadonlyArray<keyof typeof ABOUT>) => {
  const rows = [...keys.map((key) => ABOUT[key]), ["-h, --help", "Show this help"] as const, ["--version", "Show the version"] as const]
  const width = Math.max(...[...rows, ...commands].map(([flag]) => flag.length)) + 2
  const lines = (list: ReadonlyArray<readonly [string, string]>) => list.map(([flag, about]) => `  ${flag.padEnd(width)}${about}`)
  return [
    `Usage: ${usage}`,
    "",
    ...(commands.length === 0 ? [] : ["Commands:", ...lines(commands), ""]),
    "Options:",
    ...lines(rows),
    "",
    "Exit codes: 0 done, 1 a failure at run time (the error on stderr), 2 a command line that cannot run, 130 interrupted.",
    ""
  ].join("\n")
}

export const MAIN_HELP = helpText(
  [
    "lite-agent [options]              an interactive session in this terminal",
    "       lite-agent -p <prompt> [options]   one turn, the answer printed",
    "       lite-agent serve [options]         sessions (and an agent) over HTTP"
  ].join("\n"),
  [["serve", "Serve sessions over HTTP and Server-Sent Events (lite-agent serve --help)"]],
  [
    "print",
    "outputFormat",
    "workdir",
    "session",
    "continue",
    "checkpointer",
    "model",
    "modelName",
    "maxSteps",
    "capture",
    "permissionMode",
    "allowedTools",
    "disallowedTools",
    "noColor"
  ]
)
export const SERVE_HELP = helpText(
  "lite-agent serve [options]",
  [],
  ["host", "port", "token", "checkpointer", "serveModel", "modelName", "maxSteps", "workdir", "capture", "permissionMode", "allowedTools", "disallowedTools"]
)

/** Options that take a value: a `--help` right after one is that value, not a request for help. */
const TAKES_VALUE = new Set(["-p", "--print", "--output-format", "--workdir", "--session", "--checkpointer", "--model", "--model-name", "--max-steps", "--capture", "--host", "--port", "--token", "--permission-mode", "--allowed-tools", "--disallowed-tools"])
export const asksForHelp = (args: ReadonlyArray<string>) =>
  args.some((arg, index) => (arg === "--help" || arg === "-h") && !TAKES_VALUE.has(args[index - 1] ?? ""))

/** `--version` anywhere but as an option's value. */
export const asksForVersion = (args: ReadonlyArray<string>) =>
  args.some((arg, index) => arg === "--version" && !TAKES_VALUE.has(args[index - 1] ?? ""))
