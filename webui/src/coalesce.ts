/**
 * Wraps a refresh so that calls arriving while it runs collapse into one more run afterwards:
 * the index version can move several times a second while a folder is indexed, and each
 * move asks for a refresh.
 */
export function coalesce(run: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | null = null;
  let again = false;
  return () => {
    if (running !== null) {
      again = true;
      return running;
    }
    running = (async () => {
      try {
        do {
          again = false;
          await run();
        } while (again);
      } finally {
        running = null;
      }
    })();
    return running;
  };
}
