// A credential a CLI command takes (an API key, a device token, a signing secret): its flag, or
// else an environment variable. A flag shows in `ps` and /proc/<pid>/cmdline, which every user of
// the machine can read, for as long as the command runs; the environment is the owner's only.

/** The flag's value if given, else the variable's (a blank one counts as not set). */
export function credentialOf(flagValue: string | undefined, env: NodeJS.ProcessEnv, variable: string): string | undefined {
  if (flagValue !== undefined) return flagValue;
  const value = env[variable];
  return value === undefined || value.trim() === '' ? undefined : value;
}
