// Shared test setup: the SDK's Node-version warning is noise in every test run.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
