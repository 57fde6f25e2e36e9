// @lite-agent/server is @lite-agent/sdk/server under its own name: one copy of the code, so one
// identity for every class (an error from either name is an instance of both).
export * from "@lite-agent/sdk/server"
