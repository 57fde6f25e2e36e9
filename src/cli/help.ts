/**
 * What the command line is: every option (its flags, what value it takes, what it does — one
 * table for the parser, args.ts, and for `--help`), the usage, the version, and when it was asked
 * for help. Imports nothing: `lite-agent --version` and `--help` are answered from here, without
 * loading the agent.
 */

export const VERSION = "0.1.0"

/** What an option takes: a text, an integer, one of some words, nothing (a switch), or a text that may be left out. */
export type Takes = "text" | "integer" | "switch" | "optional-text" | ReadonlyArray<string>

export interface OptionSpec {
  readonly flags: ReadonlyArray<string>
  readonly takes: Takes
  /** How `--help` shows the value (choices are shown as `a|b|c` unless this is given). */
  readonly value?: string
  /** The value may be anything, even another option's flag (a prompt); otherwise such a value means the value is missing. */
  readonly anyValue?: boolean
  readonly about: string
}

/** Every option of `lite-agent`, `lite-agent serve` and `lite-agent store …`. */
export const OPTIONS = {
  print: {
    flags: ["-p", "--print"],
    takes: "text",
    value: "<prompt>",
    anyValue: true,
    about: "Run one turn with this prompt (- reads it from stdin), print the answer and exit"
  },
  outputFormat: {
    flags: ["--output-format"],
    takes: ["text", "json", "stream-json"],
    about: "Print mode output: text (the answer), json (the result), stream-json (one JSON object per event per line)"
  },
  workdir: { flags: ["--workdir"], takes: "text", value: "<dir>", about: "The directory the tools work in (default: the current one)" },
  session: { flags: ["--session"], takes: "text", value: "<id>", about: "Continue this session (an id of this store; an unknown one is refused)" },
  resume: {
    flags: ["--resume"],
    takes: "optional-text",
    value: "[<id>]",
    about: "Continue a session: by its id or the start of one, or with no id from a picker of this directory's sessions"
  },
  continue: { flags: ["--continue"], takes: "switch", about: "Continue the most recent session" },
  rehome: {
    flags: ["--rehome"],
    takes: "switch",
    about: "Make this workdir the session's when its log names another (recorded in the session); without it such a session's turns and restores are refused"
  },
  checkpointer: {
    flags: ["--checkpointer"],
    takes: "text",
    value: "<store>",
    about: "Where sessions live: file:<dir>, sqlite:<file> or postgres:<url> (default: the file backend in ~/.lite-agent/sessions)"
  },
  model: { flags: ["--model"], takes: "text", value: "<model>", about: "anthropic (needs ANTHROPIC_API_KEY) or scripted:<turns.json> (offline)" },
  modelName: { flags: ["--model-name"], takes: "text", value: "<name>", about: "The provider's model name" },
  maxSteps: { flags: ["--max-steps"], takes: "integer", value: "<n>", about: "Model calls per turn at most" },
  capture: {
    flags: ["--capture"],
    takes: ["all", "tools"],
    about: "What a restore covers: all (the whole workdir, shell commands' changes included) or tools (the file tools' changes only)"
  },
  permissionMode: {
    flags: ["--permission-mode"],
    takes: ["default", "acceptEdits", "bypassPermissions", "plan"],
    value: "<mode>",
    about:
      "default (ask before shell, writes and deletes), acceptEdits (ask before shell), bypassPermissions (ask nothing), plan (read-only tools only); -p without a terminal needs one"
  },
  allowedTools: {
    flags: ["--allowed-tools"],
    takes: "text",
    value: "<rules>",
    about: "Tools that run without asking, comma-separated: a tool, or a tool and a pattern (e.g. 'shell(git status*),write_file(src/**)')"
  },
  disallowedTools: { flags: ["--disallowed-tools"], takes: "text", value: "<rules>", about: "Tools (or calls of them, e.g. 'shell(rm *)') that never run, comma-separated" },
  permissionTimeout: {
    flags: ["--permission-timeout"],
    takes: "integer",
    value: "<seconds>",
    about: "How long a permission question waits for a client's answer before it is denied (default 300; 0 waits without limit)"
  },
  noColor: { flags: ["--no-color"], takes: "switch", about: "No colours (also when NO_COLOR is set or the output is not a terminal)" },
  host: { flags: ["--host"], takes: "text", value: "<address>", about: "The address to listen on (default 127.0.0.1; others need --token)" },
  port: { flags: ["--port"], takes: "integer", value: "<n>", about: "The port (default 7321; 0 picks a free one)" },
  token: {
    flags: ["--token"],
    takes: "text",
    value: "<token>",
    about: "The bearer token clients must send, at least 16 characters (default: LITE_AGENT_TOKEN, else a random one, printed)"
  },
  serveModel: { flags: ["--model"], takes: "text", value: "<model>", about: "Also serve an agent: anthropic or scripted:<turns.json> (default: sessions only)" },
  json: { flags: ["--json"], takes: "switch", about: "Print the answer as one JSON document" },
  graceMs: {
    flags: ["--grace-ms"],
    takes: "integer",
    value: "<ms>",
    about: "Keep unreferenced objects stored or touched less than this long ago (default 3600000, one hour; at least 300000)"
  },
  olderThanMs: {
    flags: ["--older-than-ms"],
    takes: "integer",
    value: "<ms>",
    about: "Prune branches left behind whose last activity is at least this long ago (required; 0: every branch left behind)"
  },
  branches: { flags: ["--branches"], takes: "switch", about: "Break each session down by its live branches: what each references and holds alone (what pruning it frees)" },
  includeLabeled: { flags: ["--include-labeled"], takes: "switch", about: "Prune labelled branches too (kept by default)" },
  pruneSession: { flags: ["--session"], takes: "text", value: "<id>", about: "Only this session (default: every session of the store)" },
  maxStoreBytes: {
    flags: ["--max-store-bytes"],
    takes: "integer",
    value: "<n>",
    about: "The store's quota: past it, captures store no new content and report the paths as not covered (nothing is deleted; default: none)"
  }
} as const satisfies Record<string, OptionSpec>

export type OptionKey = keyof typeof OPTIONS

/** The options of `lite-agent` (an interactive session, or `-p`), in the order `--help` lists them. */
export const MAIN_OPTIONS = [
  "print",
  "outputFormat",
  "workdir",
  "session",
  "resume",
  "continue",
  "rehome",
  "checkpointer",
  "maxStoreBytes",
  "model",
  "modelName",
  "maxSteps",
  "capture",
  "permissionMode",
  "allowedTools",
  "disallowedTools",
  "noColor"
] as const satisfies ReadonlyArray<OptionKey>

/** The options of `lite-agent serve`. */
export const SERVE_OPTIONS = [
  "host",
  "port",
  "token",
  "checkpointer",
  "maxStoreBytes",
  "serveModel",
  "modelName",
  "maxSteps",
  "workdir",
  "capture",
  "permissionMode",
  "allowedTools",
  "disallowedTools",
  "permissionTimeout"
] as const satisfies ReadonlyArray<OptionKey>

/** The options of `lite-agent store du`. */
export const STORE_DU_OPTIONS = ["checkpointer", "maxStoreBytes", "branches", "json"] as const satisfies ReadonlyArray<OptionKey>

/** The options of `lite-agent store gc`. */
export const STORE_GC_OPTIONS = ["checkpointer", "graceMs", "json"] as const satisfies ReadonlyArray<OptionKey>

/** The options of `lite-agent store prune`. */
export const STORE_PRUNE_OPTIONS = ["checkpointer", "olderThanMs", "includeLabeled", "pruneSession", "json"] as const satisfies ReadonlyArray<OptionKey>

/** The commands of `lite-agent store`, as `--help` lists them. */
export const STORE_COMMANDS: ReadonlyArray<readonly [string, string]> = [
  ["du", "What the store holds: its objects and logs, each session's share, what no session references"],
  ["gc", "Delete the objects no session references that are past the grace period"],
  ["prune", "Prune branches left behind by restores, undos and switches (nothing deleted; gc then frees their objects)"]
]

const shownFlags = (spec: OptionSpec) => {
  const value = spec.value ?? (typeof spec.takes === "string" ? undefined : spec.takes.join("|"))
  return value === undefined ? spec.flags.join(", ") : `${spec.flags.join(", ")} ${value}`
}

const helpText = (usage: string, commands: ReadonlyArray<readonly [string, string]>, keys: ReadonlyArray<OptionKey>) => {
  const rows = [
    ...keys.map((key): readonly [string, string] => [shownFlags(OPTIONS[key]), OPTIONS[key].about]),
    ["-h, --help", "Show this help"] as const,
    ["--version", "Show the version"] as const
  ]
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
    "       lite-agent serve [options]         sessions (and an agent) over HTTP",
    "       lite-agent store du|gc|prune [options]   what the session store holds; collect what nothing references; prune old branches"
  ].join("\n"),
  [
    ["serve", "Serve sessions over HTTP and Server-Sent Events (lite-agent serve --help)"],
    ["store", "Look after the session store: du, gc, prune (lite-agent store --help)"]
  ],
  MAIN_OPTIONS
)
export const SERVE_HELP = helpText("lite-agent serve [options]", [], SERVE_OPTIONS)
export const STORE_HELP = helpText("lite-agent store <command> [options]", STORE_COMMANDS, [])
const STORE_COMMAND_HELP: Record<string, string> = {
  du: helpText("lite-agent store du [options]", [], STORE_DU_OPTIONS),
  gc: helpText("lite-agent store gc [options]", [], STORE_GC_OPTIONS),
  prune: helpText("lite-agent store prune --older-than-ms <ms> [options]", [], STORE_PRUNE_OPTIONS)
}

/** The help a command line asks for: of the command, of `serve`, of `store` or of one of its commands; and the arguments after the command's name. */
const helpFor = (args: ReadonlyArray<string>): { readonly help: string; readonly own: ReadonlyArray<string> } => {
  if (args[0] === "serve") return { help: SERVE_HELP, own: args.slice(1) }
  if (args[0] !== "store") return { help: MAIN_HELP, own: args }
  const command = args[1]
  return command !== undefined && Object.hasOwn(STORE_COMMAND_HELP, command)
    ? { help: STORE_COMMAND_HELP[command]!, own: args.slice(2) }
    : { help: STORE_HELP, own: args.slice(1) }
}

/** Flags that take a value: a `--help` right after one is that value, not a request for help. */
const TAKES_VALUE = new Set(
  Object.values(OPTIONS).flatMap((spec: OptionSpec) => (spec.takes === "switch" || spec.takes === "optional-text" ? [] : spec.flags))
)
const asked = (args: ReadonlyArray<string>, flags: ReadonlyArray<string>) =>
  args.some((arg, index) => flags.includes(arg) && !TAKES_VALUE.has(args[index - 1] ?? ""))

/**
 * Answers `--help` (of the command, of `serve`, of `store` and its commands) and `--version` —
 * anywhere but as an option's value — and says whether it did.
 */
export const answeredHelpOrVersion = (args: ReadonlyArray<string>): boolean => {
  const { help, own } = helpFor(args)
  if (asked(own, ["--help", "-h"])) process.stdout.write(help)
  else if (asked(own, ["--version"])) process.stdout.write(`${VERSION}\n`)
  else return false
  return true
}
