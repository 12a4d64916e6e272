// Placeholder until this program lands; replaced by its own issue's work.
export async function run(_argv: string[], _env: NodeJS.ProcessEnv): Promise<void> {
  throw new Error('not built yet');
}
