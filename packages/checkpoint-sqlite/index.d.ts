// @lite-agent/checkpoint-sqlite is @lite-agent/sdk/checkpoint-sqlite under its own name: one copy of the code, so one
// identity for every class (an error from either name is an instance of both).
export * from "@lite-agent/sdk/checkpoint-sqlite"
