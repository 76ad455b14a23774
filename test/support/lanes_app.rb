# frozen_string_literal: true

# The test app plus tasks that must run on thread workers: a `solid-jobs`
# process started with it runs a mixed node (worker Ractors and threads).
require_relative "cli_app"
require_relative "thread_tasks"
