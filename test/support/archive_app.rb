# frozen_string_literal: true

# The test app plus the archive tests' tasks (what `solid-jobs --require`
# loads in test/web_archive_test.rb).
require_relative "cli_app"
require_relative "archive_tasks"
