/**
 * `lite-agent store <command>`: looking after the session store named by `--checkpointer` (the
 * default file store without it), opened as every other command opens it.
 *
 * - `du`: what the store holds — its objects and logs, what no session references, and each
 *   session's share (the objects it references, those it shares with other sessions, those only
 *   it holds), most bytes of its own first.
 * - `gc`: deletes the objects no session references that nobody stored or touched within the
 *   grace period (`--grace-ms`), safe while other processes append; says what it kept and freed.
 *
 * - `prune`: prunes the branches left behind (by restores, undos, switches) last active at least
 *   `--older-than-ms` ago, unlabelled unless `--include-labeled`: one event per session, nothing
 *   deleted; the next `gc` frees what only they referenced.
 *
 * Each prints text, or with `--json` the library's answer (`StoreUsage`, `GcReport`) as JSON.
 * A missing or unknown command is a usage error (exit 2). A command is one case of `storeCommand`.
 */
import { Effect, Either } from "effect"
import { Checkpointer, type CheckpointerService, type GcReport, MIN_GRACE_MS, type PruneBranchesReport, type StoreUsage } from "../core/Checkpointer.js"
import { jsonText } from "../core/encoding.js"
import { parseOptions, type ParsedOptions } from "./args.js"
import { type OptionKey, STORE_COMMANDS, STORE_DU_OPTIONS, STORE_GC_OPTIONS, STORE_PRUNE_OPTIONS } from "./help.js"
import { sizeOf } from "./render.js"
import { checkpointerLayer, CliUsageError } from "./setup.js"

const line = (text: string) => Effect.sync(() => process.stdout.write(`${text}\n`))

const plural = (count: number, word: string) => `${count} ${word}${count === 1 ? "" : "s"}`
const objectBytes = ({ bytes, objects }: StoreUsage["objects"]) => `${sizeOf(bytes)} in ${plural(objects, "object")}`

/** `du` as text: the store's totals, then one row per session, most bytes of its own first. Pure. */
export const usageLines = (usage: StoreUsage): Array<string> => {
  const totals = [
    `objects         ${objectBytes(usage.objects)}`,
    `  referenced    ${objectBytes(usage.referenced)}`,
    `  unreferenced  ${objectBytes(usage.unreferenced)} (what gc deletes once past the grace period)`,
    `logs            ${sizeOf(usage.logBytes)}`,
    `sessions        ${usage.sessions.length}`,
    ...(usage.quota === undefined ? [] : [
      `quota           ${sizeOf(usage.quota.storeBytes)} of ${sizeOf(usage.quota.maxStoreBytes)}` +
      (usage.quota.reached ? " reached: captures store no new content (gc, prune or delete sessions to free room)" : "")
    ])
  ]
  if (usage.sessions.length === 0) return totals
  const sessions = [...usage.sessions].sort((a, b) => b.own.bytes - a.own.bytes || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  const header = ["session", "referenced", "shared", "own", "log"] as const
  const rows = sessions.map((session) => [
    session.id,
    sizeOf(session.referenced.bytes),
    sizeOf(session.shared.bytes),
    sizeOf(session.own.bytes),
    sizeOf(session.logBytes)
  ])
  return [...totals, "", ...table(header, rows, 1), ...branchLines(sessions)]
}

/** Rows under a header, the first `leftColumns` cells left-aligned, the sizes after them right-aligned. */
const table = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>, leftColumns: number): Array<string> => {
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]!.length)))
  const row = (cells: ReadonlyArray<string>) =>
    cells.map((cell, column) => (column < leftColumns ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!))).join("  ").trimEnd()
  return [row(header), ...rows.map(row)]
}

/** `du --branches`: a row per live branch of each session, after the sessions' rows. Pure. */
const branchLines = (sessions: StoreUsage["sessions"]): Array<string> => {
  const rows = sessions.flatMap((session) =>
    (session.branches ?? []).map((branch) => [
      session.id,
      `${branch.tip}${branch.current ? " (current)" : ""}${branch.label === undefined ? "" : ` ${JSON.stringify(branch.label)}`}`,
      sizeOf(branch.referenced.bytes),
      sizeOf(branch.own.bytes)
    ]))
  return rows.length === 0 ? [] : ["", ...table(["session", "branch tip", "referenced", "own"], rows, 2)]
}

/** `gc` as text: what it read, kept and deleted. Pure. */
export const gcLines = (report: GcReport, graceMs: number | undefined): Array<string> => [
  `sessions read   ${report.sessions}`,
  `objects         ${report.objects}`,
  `  referenced    ${report.referenced} (kept)`,
  `  recent        ${report.recent} (unreferenced, kept: stored or touched within the grace period, ${
    graceMs === undefined ? "one hour" : `${graceMs} ms`
  })`,
  `  deleted       ${report.deleted} (${sizeOf(report.freedBytes)} freed)`
]

/** `prune` as text: per session, the branches pruned and those kept with why; the sessions skipped. Pure. */
export const pruneLines = (report: PruneBranchesReport): Array<string> => {
  const pruned = report.sessions.reduce((total, session) => total + session.pruned.length, 0)
  const lines = [`branches pruned ${pruned} (last active before ${new Date(report.before).toISOString()})`]
  for (const session of report.sessions) {
    const kept = session.kept.map((branch) => `${branch.tip} (${branch.reason})`).join(", ")
    lines.push(
      `  ${session.sessionId}: ${session.pruned.length === 0 ? "none pruned" : `pruned ${session.pruned.map((branch) => branch.tip).join(", ")}`}` +
        (kept === "" ? "" : `; kept ${kept}`)
    )
  }
  for (const skipped of report.skipped) lines.push(`  ${skipped.sessionId}: skipped (${skipped.reason}: ${skipped.detail})`)
  if (pruned > 0) lines.push("their objects go at the next gc past the grace period (lite-agent store gc)")
  return lines
}

/** The command run against the store `--checkpointer` names. */
const withStore = <A, E>(spec: string | undefined, use: (checkpointer: CheckpointerService) => Effect.Effect<A, E>, maxStoreBytes?: number) =>
  Effect.flatMap(checkpointerLayer(spec, maxStoreBytes), (layer) => Effect.flatMap(Checkpointer, use).pipe(Effect.provide(layer)))

const du = (args: ParsedOptions<(typeof STORE_DU_OPTIONS)[number]>) =>
  withStore(args.checkpointer, (checkpointer) =>
    Effect.flatMap(checkpointer.du({ branches: args.branches }), (usage) => args.json ? line(jsonText(usage)) : line(usageLines(usage).join("\n"))), args.maxStoreBytes)

const gc = (args: ParsedOptions<(typeof STORE_GC_OPTIONS)[number]>) =>
  Effect.gen(function*() {
    const graceMs = args.graceMs
    if (graceMs !== undefined && graceMs < MIN_GRACE_MS) {
      return yield* new CliUsageError({
        message: `--grace-ms must be at least ${MIN_GRACE_MS} (5 minutes): a writer in another process may be about to reference an object it just stored; got ${graceMs}`
      })
    }
    yield* withStore(args.checkpointer, (checkpointer) =>
      Effect.flatMap(
        checkpointer.gc(graceMs === undefined ? undefined : { graceMs }),
        (report) => args.json ? line(jsonText(report)) : line(gcLines(report, graceMs).join("\n"))
      ))
  })

const prune = ({ olderThanMs, ...args }: ParsedOptions<(typeof STORE_PRUNE_OPTIONS)[number]>) =>
  olderThanMs === undefined
    ? Effect.fail(new CliUsageError({ message: "lite-agent store prune needs --older-than-ms <ms> (0: every branch left behind)" }))
    : withStore(args.checkpointer, (checkpointer) =>
      Effect.flatMap(
        checkpointer.pruneBranches({
          olderThanMs,
          keepLabeled: !args.includeLabeled,
          ...(args.pruneSession === undefined ? {} : { sessionId: args.pruneSession })
        }),
        (report) => args.json ? line(jsonText(report)) : line(pruneLines(report).join("\n"))
      ))

const parsed = <const K extends OptionKey, A, E>(
  command: string,
  keys: ReadonlyArray<K>,
  args: ReadonlyArray<string>,
  run: (options: ParsedOptions<K>) => Effect.Effect<A, E>
): Effect.Effect<A | void, E | CliUsageError> =>
  Either.match(parseOptions(command, keys, args), {
    onLeft: (message) => Effect.fail(new CliUsageError({ message })),
    onRight: run
  })

const COMMAND_NAMES = STORE_COMMANDS.map(([name]) => name).join(", ")

/** `lite-agent store <command> [options]`, given what follows `store`. */
export const storeCommand = (args: ReadonlyArray<string>): Effect.Effect<void, unknown> => {
  const [command, ...rest] = args
  switch (command) {
    case "du":
      return parsed("lite-agent store du", STORE_DU_OPTIONS, rest, du)
    case "gc":
      return parsed("lite-agent store gc", STORE_GC_OPTIONS, rest, gc)
    case "prune":
      return parsed("lite-agent store prune", STORE_PRUNE_OPTIONS, rest, prune)
    case undefined:
      return Effect.fail(new CliUsageError({ message: `lite-agent store needs a command: ${COMMAND_NAMES} (lite-agent store --help)` }))
    default:
      return Effect.fail(
        new CliUsageError({ message: `lite-agent store has no command ${JSON.stringify(command)}: ${COMMAND_NAMES} (lite-agent store --help)` })
      )
  }
}
