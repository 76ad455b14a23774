# frozen_string_literal: true

module SolidJobs
  # Where `solid-jobs engine` finds solid-engine-server: beside the
  # extension in lib/solid_jobs/ (built there by `gem install`, shipped
  # there by the platform gem), else in a checkout's cargo output (`rake
  # engine:build`).
  module EngineServer
    NAME = "solid-engine-server"
    INSTALLED = File.join(__dir__, NAME)
    CHECKOUT = File.expand_path("../../target/release/#{NAME}", __dir__)

    module_function

    def binary = [INSTALLED, CHECKOUT].find { |path| File.file?(path) && File.executable?(path) }

    def missing_message
      "#{NAME} is not built: it is built with the extension by `gem install solid-jobs`; " \
        "in a checkout run `bundle exec rake engine:build` (looked in #{INSTALLED} and #{CHECKOUT})"
    end
  end
end
