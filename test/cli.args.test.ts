import { Either, Option } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { parseOptions } from "../src/cli/args.js"
import { MAIN_OPTIONS, SERVE_OPTIONS } from "../src/cli/help.js"

const main = (args: ReadonlyArray<string>) => parseOptions("lite-agent", MAIN_OPTIONS, args)
const problem = (args: ReadonlyArray<string>) => Either.match(main(args), { onLeft: (message) => message, onRight: () => "parsed" })

describe("the command line (src/cli/args.ts)", () => {
  it("reads values, choices, integers and switches, as `--flag value` or `--flag=value`; what is not given is undefined (a switch false)", () => {
    const parsed = Either.getOrThrow(main(["-p", "hi", "--output-format=json", "--max-steps", "3", "--continue", "--capture", "tools"]))
    expect(parsed).toEqual({
      print: "hi",
      outputFormat: "json",
      workdir: undefined,
      session: undefined,
      resume: undefined,
      continue: true,
      rehome: false,
      checkpointer: undefined,
      model: undefined,
      modelName: undefined,
      maxSteps: 3,
      capture: "tools",
      permissionMode: undefined,
      allowedTools: undefined,
      disallowedTools: undefined,
      noColor: false
    })
  })

  it("--resume takes an id or nothing: what follows is its id unless it is another option", () => {
    expect(Either.getOrThrow(main(["--resume"])).resume).toBe("")
    expect(Either.getOrThrow(main(["--resume", "7fcc"])).resume).toBe("7fcc")
    expect(Either.getOrThrow(main(["--resume=7fcc"])).resume).toBe("7fcc")
    const followed = Either.getOrThrow(main(["--resume", "--model", "anthropic"]))
    expect([followed.resume, followed.model]).toEqual(["", "anthropic"])
    expect(problem(["--resume", "a", "--resume"])).toBe("--resume is given twice")
  })

  it("a prompt may be anything, even a flag; another option's value may not be a flag", () => {
    expect(Either.getOrThrow(main(["-p", "--model"])).print).toBe("--model")
    expect(Either.getOrThrow(main(["--print", "-"])).print).toBe("-")
    expect(problem(["--model", "--session", "x"])).toBe("--model needs a value")
    expect(Either.getOrThrow(main(["--model=--session"])).model).toBe("--session")
  })

  it.each([
    [["--bogus"], "lite-agent has no option --bogus (lite-agent --help lists them)"],
    [["hello"], 'lite-agent takes no argument "hello": options only (a prompt goes after -p)'],
    [["-"], 'lite-agent takes no argument "-": options only (a prompt goes after -p)'],
    [["--workdir"], "--workdir needs a value"],
    [["--session", "a", "--session", "b"], "--session is given twice"],
    [["-p", "a", "--print", "b"], "--print is given twice"],
    [["--max-steps", "1.5"], '--max-steps takes an integer, got "1.5"'],
    [["--max-steps", "99999999999999999999"], '--max-steps takes an integer, got "99999999999999999999"'],
    [["--output-format", "yaml"], '--output-format takes one of text, json, stream-json, got "yaml"'],
    [["--no-color=1"], "--no-color takes no value"],
    [["--host", "::1"], "lite-agent has no option --host (lite-agent --help lists them)"]
  ])("%j: %s", (args, message) => {
    expect(problem(args)).toBe(message)
  })

  it("serve has its own options: --model there is the agent to serve, --host and --port its address", () => {
    const parsed = Either.getOrThrow(parseOptions("lite-agent serve", SERVE_OPTIONS, ["--model", "anthropic", "--port", "0", "--host=::1"]))
    expect(parsed.serveModel).toBe("anthropic")
    expect(parsed.port).toBe(0)
    expect(parsed.host).toBe("::1")
    expect(Either.getLeft(parseOptions("lite-agent serve", SERVE_OPTIONS, ["-p", "hi"]))).toEqual(
      Option.some("lite-agent serve has no option -p (lite-agent serve --help lists them)")
    )
  })

  it("any set of options, in any order and either spelling, reads back as given", () => {
    const text = fc.string({ minLength: 1 }).filter((value) => !value.startsWith("-"))
    const given = fc.record(
      {
        session: text,
        model: text,
        maxSteps: fc.integer({ min: -1_000_000, max: 1_000_000 }),
        permissionMode: fc.constantFrom("default", "acceptEdits", "bypassPermissions", "plan"),
        continue: fc.constant(true)
      },
      { requiredKeys: [] }
    )
    const flagOf = { session: "--session", model: "--model", maxSteps: "--max-steps", permissionMode: "--permission-mode", continue: "--continue" } as const
    const order = fc.shuffledSubarray(Object.keys(flagOf) as Array<keyof typeof flagOf>, { minLength: 5 })
    fc.assert(fc.property(given, fc.boolean(), order, (options, joined, keys) => {
      const args = keys.filter((key) => options[key] !== undefined).flatMap((key) => {
        const value = options[key]
        const flag = flagOf[key]
        if (value === true) return [flag]
        return joined ? [`${flag}=${String(value)}`] : [flag, String(value)]
      })
      const parsed = Either.getOrThrow(main(args))
      expect(parsed.session).toBe(options.session)
      expect(parsed.model).toBe(options.model)
      expect(parsed.maxSteps).toBe(options.maxSteps)
      expect(parsed.permissionMode).toBe(options.permissionMode)
      expect(parsed.continue).toBe(options.continue === true)
    }))
  })
})
