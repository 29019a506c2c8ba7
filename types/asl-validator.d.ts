// asl-validator 4.0.0 ships no type declarations: the part of its API relaunch uses.
declare module 'asl-validator' {
  interface AslValidationError {
    readonly 'Error code': string;
    readonly Message: string;
  }
  interface AslValidationResult {
    readonly isValid: boolean;
    readonly errors: readonly AslValidationError[];
    errorsText(separator?: string): string;
  }
  /** Validates a definition; note that it adds `QueryLanguage` to every state it visits. */
  function aslValidator(
    definition: object,
    options?: { readonly checkPaths: boolean; readonly checkArn: boolean },
  ): AslValidationResult;
  export = aslValidator;
}
