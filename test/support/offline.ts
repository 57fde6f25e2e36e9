/**
 * The environment for a child process that must not reach Anthropic: this process's, without
 * ANTHROPIC_API_KEY (programs then use the scripted model) or ANTHROPIC_BASE_URL, plus `extra`
 * (a test that runs against the fake Anthropic server sets both there).
 */
export const offlineEnv = (extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = { ...process.env }
  delete env["ANTHROPIC_API_KEY"]
  delete env["ANTHROPIC_BASE_URL"]
  return { ...env, ...extra }
}
