/** Finding the session a command line names: an id, the start of exactly one, or a refusal naming the closest ids. */
import { describe, expect, it } from "vitest"
import { closeMatches, lookUpSession } from "../src/cli/sessionLookup.js"

const ids = ["7fccafeb-33e2-40bf-9d5b-49c85a714f74", "7fd01234-0000-4000-8000-000000000000", "build-docs", "build-tests", "release"]

describe("looking up a session by what was typed", () => {
  it("an id is found as it is; the start of exactly one only where a prefix is allowed", () => {
    expect(lookUpSession("release", ids, false)).toEqual({ found: "release" })
    expect(lookUpSession("7fcc", ids, true)).toEqual({ found: ids[0] })
    expect(lookUpSession("7fcc", ids, false)).toMatchObject({ problem: expect.stringContaining("no session 7fcc in this store; the closest: 7fccafeb") })
    expect(lookUpSession("7f", ids, true)).toEqual({ problem: `7f starts 2 sessions (${ids[0]}, ${ids[1]}): give more of it` })
  })

  it("what names none is refused with the ids closest to it, closest first, or none when nothing is close", () => {
    expect(closeMatches("build-test", ids)).toEqual(["build-tests", "build-docs"])
    expect(closeMatches("relaese", ids)).toEqual(["release"])
    expect(closeMatches("zzzz", ids)).toEqual([])
    expect(lookUpSession("zzzz", ids, true)).toEqual({ problem: "no session zzzz in this store" })
  })
})
