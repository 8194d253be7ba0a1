mod gateway;
mod kernel;
mod kernel_postgres;
mod upstream;
