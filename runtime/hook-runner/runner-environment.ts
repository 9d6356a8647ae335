// The environment the runtime hands the hook-runner child it starts: what Node and the runner read,
// nothing else. The runner runs tenants' WebAssembly; the runtime's environment may hold the
// platform admin token (SLUICE_ADMIN_TOKEN), an operator's API key (SLUICE_API_KEY) and whatever
// else its deployment sets, none of which the runner needs or should hold.

/** Variables passed through when set: the system's and Node's, then the runner's own settings. */
const PASSED = [
  'PATH', 'HOME', 'TMPDIR', 'TMP', 'TEMP', 'LANG', 'LC_ALL', 'LC_CTYPE', 'TZ',
  'NODE_OPTIONS', 'NODE_EXTRA_CA_CERTS',
  'UV_THREADPOOL_SIZE',
  'SLUICE_MASTER_KEY', 'SLUICE_PREVIOUS_MASTER_KEYS', 'SLUICE_COMPILE_TIMEOUT_S', 'SLUICE_COMPILE_MAX_MEMORY_MIB',
] as const;

/** The variables of `base` the runner child may see (PASSED), without the unset ones. */
export function runnerEnvironment(base: NodeJS.ProcessEnv): Record<string, string> {
  const picked: Record<string, string> = {};
  for (const name of PASSED) {
    const value = base[name];
    if (value !== undefined) picked[name] = value;
  }
  return picked;
}
